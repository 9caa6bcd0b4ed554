#include "kernels/plugin/plugin_subject.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "reference/formats.h"

namespace fc {

namespace {

constexpr size_t kMessageSize = 2048;

std::string recipe_list(uint32_t bits) {
  std::string s;
  for (Recipe r : all_recipes)
    if (bits & (1u << static_cast<unsigned>(r))) s += (s.empty() ? "" : ",") + std::string(recipe_spec(r).name);
  return s.empty() ? "none" : s;
}

// Converts true values to stored bit patterns: stored = value / descale, which must be representable
// (the generators make fp8 inputs that way). Returns a byte buffer of n * storage_bytes(f).
std::vector<unsigned char> encode_tensor(const char* name, Format f, const std::vector<double>& values,
                                         double descale) {
  const size_t w = storage_bytes(f);
  std::vector<unsigned char> out(values.size() * w);
  for (size_t i = 0; i < values.size(); ++i) {
    const double stored = values[i] / descale;
    uint32_t bits;
    try {
      bits = encode(f, stored);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("plugin subject: ") + name + "[" + std::to_string(i) + "] = " +
                                  std::to_string(values[i]) + " (stored " + std::to_string(stored) +
                                  ") is not a value of " + std::string(spec(f).name) + ": " + e.what());
    }
    std::memcpy(out.data() + i * w, &bits, w);  // little-endian: the low bytes hold the pattern
  }
  return out;
}

double decode_element(Format f, const unsigned char* p) {
  uint32_t bits = 0;
  std::memcpy(&bits, p, storage_bytes(f));
  if (f == Format::fp32 || f == Format::tf32) {
    float x;
    std::memcpy(&x, &bits, 4);
    return double(x);
  }
  return decode(f, bits);
}

// An output buffer with poisoned margins: [guard | body | guard]. The body is filled with all-ones
// bytes (a NaN in fp32, fp16 and bf16), so an element the plugin never writes cannot pass; the guards
// hold a position-dependent pattern so that a stray write of any constant is seen.
struct GuardedBuffer {
  size_t elements = 0, width = 0;
  std::vector<unsigned char> bytes;

  static unsigned char poison(size_t i) { return static_cast<unsigned char>(0xA5u ^ ((i * 0x3Bu) & 0xFFu)); }

  GuardedBuffer(size_t n, size_t w) : elements(n), width(w), bytes((n + 2 * PluginSubject::guard_elements) * w) {
    const size_t g = PluginSubject::guard_elements * w;
    for (size_t i = 0; i < g; ++i) bytes[i] = poison(i);
    std::memset(bytes.data() + g, 0xFF, n * w);
    for (size_t i = 0; i < g; ++i) bytes[g + n * w + i] = poison(i);
  }
  unsigned char* body() { return bytes.data() + PluginSubject::guard_elements * width; }

  // Empty when intact, else a description of the overwritten margin.
  std::string check(const std::string& name) const {
    const size_t g = PluginSubject::guard_elements * width;
    size_t before = 0, after = 0, first_after = SIZE_MAX, last_before = SIZE_MAX;
    for (size_t i = 0; i < g; ++i)
      if (bytes[i] != poison(i)) { ++before; if (last_before == SIZE_MAX) last_before = i; }
    for (size_t i = 0; i < g; ++i)
      if (bytes[g + elements * width + i] != poison(i)) { ++after; if (first_after == SIZE_MAX) first_after = i; }
    if (!before && !after) return {};
    std::ostringstream s;
    s << "wrote outside " << name << " (" << elements << " elements of " << width << " bytes):";
    if (after)
      s << " " << after << " byte(s) after the end, the first at element " << elements + first_after / width
        << " (one past the end is element " << elements << ")";
    if (before)
      s << (after ? ";" : "") << " " << before << " byte(s) before the start, the furthest at element -"
        << (g - last_before + width - 1) / width;
    return s.str();
  }
};

}  // namespace

std::unique_ptr<PluginSubject> PluginSubject::open(const std::string& path) {
  // A plugin is a file: a relative path is resolved against the current folder, never looked up on the
  // library path the way dlopen treats a name without a slash (which would load another library).
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::absolute(path, ec).lexically_normal();
  if (ec || !std::filesystem::is_regular_file(file, ec))
    throw SubjectError("cannot load plugin " + path + ": no such file" +
                       (std::filesystem::path(path).is_relative() ? " (" + file.string() + ")" : std::string()));
  // RTLD_LOCAL: two plugins (our fused kernel and the naive one) export the same entry symbol. The
  // handle is never closed: a plugin with a static CUDA runtime may register exit handlers, and
  // unloading it under them crashes at exit.
  dlerror();
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    throw SubjectError("cannot load plugin " + path + ": " + (err ? err : "dlopen failed"));
  }
  dlerror();
  void* sym = dlsym(handle, FC_PLUGIN_ENTRY_SYMBOL);
  if (!sym) {
    const char* err = dlerror();
    throw SubjectError("plugin " + path + " does not export " + FC_PLUGIN_ENTRY_SYMBOL + " (" +
                       (err ? err : "symbol not found") + ")");
  }
  fc_plugin_entry_fn entry;
  static_assert(sizeof(entry) == sizeof(sym));
  std::memcpy(&entry, &sym, sizeof(entry));
  return std::make_unique<PluginSubject>(entry, path);
}

PluginSubject::PluginSubject(fc_plugin_entry_fn entry, std::string origin) : origin_(std::move(origin)) {
  if (!entry) throw SubjectError("plugin " + origin_ + ": null entry function");
  plugin_ = entry();
  if (!plugin_) throw SubjectError("plugin " + origin_ + ": " + FC_PLUGIN_ENTRY_SYMBOL + "() returned NULL");
  init();
}

PluginSubject::PluginSubject(const fc_plugin* plugin, std::string origin) : plugin_(plugin), origin_(std::move(origin)) {
  if (!plugin_) throw SubjectError("plugin " + origin_ + ": null plugin table");
  init();
}

RunPlan PluginSubject::decode_plan(const fc_run_plan& raw, const RunOptions& o, const Problem& p) const {
  try {
    return decode_run_plan(raw, o, p);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}

void PluginSubject::fail(const std::string& what) const { throw SubjectError("plugin " + origin_ + ": " + what); }

void PluginSubject::init() {
  // The version first: nothing else in the table is meaningful under another ABI.
  if (plugin_->abi_version < FC_ABI_VERSION_MIN || plugin_->abi_version > FC_ABI_VERSION)
    throw SubjectError("plugin " + origin_ + " was built for flashcheck ABI v" + std::to_string(plugin_->abi_version) +
                       ", this flashcheck speaks v" + std::to_string(FC_ABI_VERSION_MIN) + " to v" +
                       std::to_string(FC_ABI_VERSION) + "; rebuild it against this flashcheck's "
                       "include/flashcheck/plugin.h");
  if (!plugin_->capabilities || !plugin_->forward) fail("the plugin table has a null function pointer");
  char message[kMessageSize] = {};
  raw_ = fc_capabilities{};
  const fc_status st = plugin_->capabilities(&raw_, message, sizeof message);
  message[kMessageSize - 1] = '\0';
  if (st != FC_OK) fail(std::string("capabilities() returned ") + status_name(st) + ": " + message);
  if (raw_.abi_version != plugin_->abi_version)
    fail("capabilities declare ABI v" + std::to_string(raw_.abi_version) + ", its plugin table v" +
         std::to_string(plugin_->abi_version));
  if (raw_.n_head_dims < 0 || raw_.n_head_dims > FC_MAX_HEAD_DIMS)
    fail("capabilities declare n_head_dims = " + std::to_string(raw_.n_head_dims) + " (0.." +
         std::to_string(FC_MAX_HEAD_DIMS) + ")");
  if (raw_.n_tiles < 0 || raw_.n_tiles > FC_MAX_TILES)
    fail("capabilities declare n_tiles = " + std::to_string(raw_.n_tiles) + " (0.." + std::to_string(FC_MAX_TILES) + ")");
  if (!(raw_.memory & (FC_MEMORY_HOST | FC_MEMORY_DEVICE))) fail("capabilities declare no memory space");
  caps_ = to_capabilities(raw_);
  if (caps_.name.empty()) caps_.name = origin_;
}

SubjectOutput PluginSubject::run(const Problem& p, const AttentionInputs& in, const RunOptions& o) {
  if (!poisoned_.empty())
    throw SubjectSticky("plugin " + origin_ + " reported a sticky error earlier in this process (" + poisoned_ +
                        "); no later case can run in it (run the plugin in a worker process, the default)");
  validate_inputs(p, in);
  if (!(raw_.memory & FC_MEMORY_HOST))
    throw SubjectError("plugin " + caps_.name + " (" + origin_ + ") accepts only device buffers; this flashcheck "
                       "passes host buffers (unsupported in this build)");
  if (!(raw_.recipes & (1u << static_cast<unsigned>(o.recipe))))
    throw SubjectError("plugin " + caps_.name + " does not declare recipe " + std::string(recipe_spec(o.recipe).name) +
                       " (it declares " + recipe_list(raw_.recipes) + ")");

  const RecipeSpec& rs = recipe_spec(o.recipe);
  const bool fp8 = is_fp8(o.recipe);
  const Format in_fmt = rs.input == Format::tf32 ? Format::fp32 : rs.input;
  auto q = encode_tensor("Q", in_fmt, in.q, fp8 ? o.q_descale : 1.0);
  auto k = encode_tensor("K", in_fmt, in.k, fp8 ? o.k_descale : 1.0);
  auto v = encode_tensor("V", in_fmt, in.v, fp8 ? o.v_descale : 1.0);

  std::vector<int32_t> key_lengths;
  for (int64_t len : p.key_lengths) {
    if (len > std::numeric_limits<int32_t>::max())
      throw std::invalid_argument("plugin subject: key length " + std::to_string(len) + " does not fit the ABI's int32");
    key_lengths.push_back(static_cast<int32_t>(len));
  }
  const fc_problem fp = to_fc_problem(p, o, key_lengths.empty() ? nullptr : key_lengths.data());

  const Format out_fmt = rs.output;
  const size_t ow = storage_bytes(out_fmt);
  GuardedBuffer obuf(p.o_size(), ow);
  const bool want_lse = raw_.features & FC_CAP_LSE;
  GuardedBuffer lbuf(want_lse ? p.lse_size() : 0, sizeof(float));

  fc_buffers b{};
  b.memory = FC_MEMORY_HOST;
  b.q = contiguous_tensor(q.data(), p.heads_q, p.n_q, p.d);
  b.k = contiguous_tensor(k.data(), p.heads_kv, p.n_k, p.d);
  b.v = contiguous_tensor(v.data(), p.heads_kv, p.n_k, p.dv);
  b.o = contiguous_tensor(obuf.body(), p.heads_q, p.n_q, p.dv);
  b.lse = want_lse ? reinterpret_cast<float*>(lbuf.body()) : nullptr;
  b.stream = nullptr;
  fc_run_plan plan{};
  b.plan = &plan;  // a v1 plugin never reads it, and what it holds afterwards is not read either

  char message[kMessageSize] = {};
  const fc_status st = plugin_->forward(&fp, &b, message, sizeof message);
  message[kMessageSize - 1] = '\0';
  if (st == FC_ERR_STICKY) {
    poisoned_ = std::string(message[0] ? message : "(no message)") + " [" + p.describe() + ", recipe " + std::string(rs.name) + "]";
    throw SubjectSticky("plugin " + origin_ + ": forward() failed with FC_ERR_STICKY, the process is unusable for "
                        "further runs: " + poisoned_);
  }
  if (st == FC_ERR_OUT_OF_MEMORY)
    throw SubjectOutOfMemory("plugin " + origin_ + ": out of memory: " + (message[0] ? message : "(no message)") + " [" +
                             p.describe() + ", recipe " + std::string(rs.name) + "]");
  // The margins first: a plugin that scribbled outside its buffers is wrong whatever it returned.
  std::string overwritten = obuf.check("O");
  const std::string lse_overwritten = want_lse ? lbuf.check("LSE") : std::string();
  if (!lse_overwritten.empty()) overwritten += (overwritten.empty() ? "" : "; ") + lse_overwritten;
  if (!overwritten.empty()) fail(overwritten + " [" + p.describe() + ", recipe " + std::string(rs.name) + "]");
  if (st == FC_ERR_UNSUPPORTED) throw SubjectRefused(caps_.name + ": " + (message[0] ? message : "(no message)"));
  if (st != FC_OK)
    fail(std::string("forward() failed with ") + status_name(st) + ": " + (message[0] ? message : "(no message)") +
         " [" + p.describe() + ", recipe " + std::string(rs.name) + "]");

  SubjectOutput out;
  if (plugin_->abi_version >= 2) out.plan = decode_plan(plan, o, p);
  out.o.resize(p.o_size());
  for (size_t i = 0; i < out.o.size(); ++i) out.o[i] = decode_element(out_fmt, obuf.body() + i * ow);
  if (want_lse) {
    out.lse.resize(p.lse_size());
    for (size_t i = 0; i < out.lse.size(); ++i) out.lse[i] = decode_element(Format::fp32, lbuf.body() + i * sizeof(float));
  }
  return out;
}

}  // namespace fc
