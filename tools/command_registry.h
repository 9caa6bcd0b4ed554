// Subcommands register themselves, so each lives in its own file under tools/commands/ and the
// executable's main knows none of them by name.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "tools/report/atomic_file.h"

namespace fc::cli {

// Adds a subcommand to the app. Its callback must set `exit_code` (0 all within budget, 1 violations,
// 2 usage or input error) rather than calling exit, so that main can flush and clean up.
using CommandFactory = std::function<void(CLI::App& app, int& exit_code)>;

struct RegisteredCommand {
  std::string name;
  CommandFactory add;
};

inline std::vector<RegisteredCommand>& command_registry() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}

struct CommandRegistrar {
  CommandRegistrar(std::string name, CommandFactory add) { command_registry().push_back({std::move(name), std::move(add)}); }
};

// Runs a command's body and turns whatever escapes it into exit 2 and one line on stderr, the same for
// every command: a usage or input error, an output that could not be written (the command's staged files
// are discarded, so nothing of the run is left), or running out of host memory (a resource error, never
// a verdict). The body returns its own exit code otherwise (0, 1, or 130 when interrupted).
template <class Body>
int run_command(const char* name, Body&& body) noexcept {
  try {
    return body();
  } catch (const fc::report::OutputError& e) {
    std::fprintf(stderr, "flashcheck %s: error: %s; nothing of this run was written\n", name, e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "flashcheck %s: error: out of host memory (std::bad_alloc): a resource error, not a verdict\n",
                 name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashcheck %s: error: %s\n", name, e.what());
  } catch (...) {  // a plugin's own exception type, say: still an error, never a crash of the tool
    std::fprintf(stderr, "flashcheck %s: error: an exception of unknown type\n", name);
  }
  return 2;
}

}  // namespace fc::cli

#define FC_REGISTER_COMMAND(name, factory) \
  static ::fc::cli::CommandRegistrar fc_command_registrar_##name(#name, factory)
