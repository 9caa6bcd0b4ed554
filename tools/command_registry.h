// Subcommands register themselves, so each lives in its own file under tools/commands/ and the
// executable's main knows none of them by name.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

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

}  // namespace fc::cli

#define FC_REGISTER_COMMAND(name, factory) \
  static ::fc::cli::CommandRegistrar fc_command_registrar_##name(#name, factory)
