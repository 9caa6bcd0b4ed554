// flashcheck: one command line for the suite. main only builds the CLI11 app and hands it to the
// commands that registered themselves (tools/commands/*.cpp, tools/command_registry.h).
//
// Exit codes, for every command: 0 all within budget, 1 violations (or a subject that failed),
// 2 usage or input error (unknown flag, impossible shape, unreadable file, unwritable folder),
// 130 interrupted (Ctrl-C; `report` still writes a partial report first).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/command_registry.h"
#include "tools/report/environment.h"

int main(int argc, char** argv) {
  CLI::App app{"flashcheck: checks FlashAttention-style fused attention kernels against a derived, per-element "
               "error budget, per precision recipe.\nStart with `flashcheck report` (the default error-budget report).",
               "flashcheck"};
  app.set_version_flag("--version", fc::report::version_string());
  app.require_subcommand(1);
  app.footer("Exit codes: 0 within budget, 1 violations, 2 usage or input error, 130 interrupted.\n"
             "Reports: docs/report-format.md.");

  int exit_code = 0;
  // Registration order follows static initialisation, which the linker decides; sort for a stable --help.
  auto commands = fc::cli::command_registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : commands) c.add(app, exit_code);

  // CLI11 would only say "A subcommand is required" for a misspelt command; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    const auto subcommands = app.get_subcommands([](CLI::App*) { return true; });
    if (std::none_of(subcommands.begin(), subcommands.end(), [&](CLI::App* c) { return c->check_name(first); })) {
      std::string known;
      for (CLI::App* c : subcommands)
        if (!c->get_group().empty()) known += (known.empty() ? "" : ", ") + c->get_name();  // not the hidden ones
      std::fprintf(stderr, "flashcheck: unknown command '%s' (commands: %s; see flashcheck --help)\n", first.c_str(),
                   known.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version come here too (exit 0); every real parse error is a usage error.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const std::exception& e) {  // the commands catch their own (fc::cli::run_command)
    std::fprintf(stderr, "flashcheck: error: %s\n", e.what());
    return 2;
  }
  std::fflush(stdout);
  return exit_code;
}
