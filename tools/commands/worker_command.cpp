// `flashcheck __worker --subject NAME --fd N`: the process a WorkerSubject (tools/report/worker_subject.h)
// starts to run a subject in isolation. Not a command for people: it is hidden from --help.
#include "tools/command_registry.h"
#include "tools/report/subject_choice.h"
#include "tools/report/worker_subject.h"

namespace fc::report {
namespace {

void add_worker(CLI::App& app, int& exit_code) {
  auto name = std::make_shared<std::string>();
  auto fd = std::make_shared<int>(3);
  CLI::App* cmd = app.add_subcommand("__worker", "");
  cmd->group("");  // hidden
  cmd->add_option("--subject", *name)->required();
  cmd->add_option("--fd", *fd);
  cmd->callback([name, fd, &exit_code] {
    std::unique_ptr<Subject> subject;
    std::string error;
    try {
      subject = open_subject(*name);
    } catch (const std::exception& e) {
      error = e.what();
    }
    exit_code = serve_worker(subject.get(), error, *fd);
  });
}

}  // namespace
}  // namespace fc::report

FC_REGISTER_COMMAND(__worker, fc::report::add_worker);
