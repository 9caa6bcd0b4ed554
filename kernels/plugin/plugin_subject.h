// A subject behind the C ABI of include/flashcheck/plugin.h: any kernel, in any framework, that exports
// flashcheck_plugin_entry. The subject owns the translation between the suite's world (true values in
// doubles, fc::Problem) and the ABI's (stored bit patterns in BHND buffers, fc_problem), and it treats
// the plugin as untrusted: the ABI version is checked before any other field is read, the output
// buffers carry poisoned guard margins that are checked after every call, every error code is a
// SubjectError carrying the plugin's own message (FC_ERR_UNSUPPORTED a SubjectRefused), and the run
// plan a v2 plugin reports must agree with what was asked explicitly. A plugin error is a failed run,
// never a pass.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "flashcheck/plugin.h"
#include "kernels/plugin/plugin_abi.h"
#include "kernels/subject.h"

namespace fc {

class PluginSubject : public Subject {
 public:
  // dlopens the shared library at `path` (relative to the current folder, never searched on the
  // library path) and looks up FC_PLUGIN_ENTRY_SYMBOL. Throws SubjectError when the library cannot be
  // loaded, lacks the entry point, or speaks another ABI version.
  static std::unique_ptr<PluginSubject> open(const std::string& path);

  // Over an entry function linked into this process; `origin` names the plugin in messages.
  PluginSubject(fc_plugin_entry_fn entry, std::string origin);
  // Over a plugin table directly (tests); the table must outlive the subject.
  PluginSubject(const fc_plugin* plugin, std::string origin);

  Capabilities capabilities() const override { return caps_; }
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override;
  const fc_plugin* plugin_table() const override { return plugin_; }

  // The capabilities exactly as the plugin declared them.
  const fc_capabilities& raw_capabilities() const { return raw_; }
  const std::string& origin() const { return origin_; }

  // Elements of poison before and after O and LSE. 64 elements cover a vectorised store of a whole
  // 128-byte line past the end at any element width.
  static constexpr size_t guard_elements = 64;

 private:
  void init();
  [[noreturn]] void fail(const std::string& what) const;
  RunPlan decode_plan(const fc_run_plan& raw, const RunOptions& o, const Problem& p) const;

  const fc_plugin* plugin_ = nullptr;
  std::string origin_;
  fc_capabilities raw_{};
  Capabilities caps_;
  std::string poisoned_;  // the FC_ERR_STICKY failure that made this process unusable for the plugin
};

}  // namespace fc
