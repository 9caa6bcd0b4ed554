#include "tools/report/worker_subject.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace fc::report {

namespace {

// Messages: one byte of type, eight of payload length, the payload.
enum Message : uint8_t {
  kReady = 'R',     // worker -> parent: the subject is open; payload: Capabilities
  kOpenError = 'E', // worker -> parent: the subject cannot be opened; payload: the message
  kRun = 'C',       // parent -> worker: Problem, RunOptions, AttentionInputs
  kOutput = 'O',    // worker -> parent: SubjectOutput
  kRefused = 'U',   // SubjectRefused: the reason
  kFailed = 'F',    // SubjectError (or any exception): the message
  kNoMemory = 'M',  // SubjectOutOfMemory or std::bad_alloc: the message
  kSticky = 'S',    // SubjectSticky: the message; the worker exits after sending it
};

struct Writer {
  std::string b;
  template <class T>
  void raw(const T& x) {
    b.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  void u64(uint64_t x) { raw(x); }
  void i64(int64_t x) { raw(x); }
  void f64(double x) { raw(x); }
  void str(const std::string& s) {
    u64(s.size());
    b += s;
  }
  void doubles(const std::vector<double>& v) {
    u64(v.size());
    b.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  }
  template <class T>
  void ints(const std::vector<T>& v) {
    u64(v.size());
    for (const T& x : v) i64(int64_t(x));
  }
};

struct Reader {
  const std::string& b;
  size_t pos = 0;
  void need(size_t n) {
    if (b.size() - pos < n) throw std::runtime_error("worker message truncated");
  }
  template <class T>
  T raw() {
    need(sizeof(T));
    T x;
    std::memcpy(&x, b.data() + pos, sizeof x);
    pos += sizeof x;
    return x;
  }
  uint64_t u64() { return raw<uint64_t>(); }
  int64_t i64() { return raw<int64_t>(); }
  double f64() { return raw<double>(); }
  bool flag() { return i64() != 0; }
  std::string str() {
    const uint64_t n = u64();
    need(n);
    std::string s = b.substr(pos, n);
    pos += n;
    return s;
  }
  std::vector<double> doubles() {
    const uint64_t n = u64();
    need(n * sizeof(double));
    std::vector<double> v(n);
    std::memcpy(v.data(), b.data() + pos, n * sizeof(double));
    pos += n * sizeof(double);
    return v;
  }
  template <class T>
  std::vector<T> ints() {
    const uint64_t n = u64();
    need(n * sizeof(int64_t));
    std::vector<T> v;
    for (uint64_t i = 0; i < n; ++i) v.push_back(T(i64()));
    return v;
  }
};

// The capability flags that cross to the parent, in one order for both directions. concurrent_runs does
// not: a worker runs one case at a time whatever its subject allows.
template <class Caps>
auto capability_flags(Caps& c) {
  return std::array{&c.dv_may_differ, &c.any_tile, &c.causal, &c.window, &c.dense_mask, &c.key_lengths, &c.gqa, &c.lse,
                    &c.split_kv, &c.fa1, &c.l_from_fp32_p, &c.two_level_accum, &c.subtile_steps, &c.deliberate_bugs};
}

void put(Writer& w, const Capabilities& c) {
  w.str(c.name);
  std::vector<int> recipes;
  for (Recipe x : c.recipes) recipes.push_back(int(x));
  w.ints(recipes);
  w.ints(c.head_dims);
  std::vector<int> tiles;
  for (const TileSize& t : c.tiles) tiles.insert(tiles.end(), {t.m, t.n});
  w.ints(tiles);
  std::vector<int> tile_recipes;
  for (Recipe x : c.tile_recipes) tile_recipes.push_back(int(x));
  w.ints(tile_recipes);
  for (const bool* f : capability_flags(c)) w.i64(*f);
}

Capabilities get_caps(Reader& r) {
  Capabilities c;
  c.name = r.str();
  for (int x : r.ints<int>()) c.recipes.push_back(Recipe(x));
  c.head_dims = r.ints<int>();
  const std::vector<int> tiles = r.ints<int>();
  for (size_t i = 0; i + 1 < tiles.size(); i += 2) c.tiles.push_back({tiles[i], tiles[i + 1]});
  for (int x : r.ints<int>()) c.tile_recipes.push_back(Recipe(x));
  for (bool* f : capability_flags(c)) *f = r.flag();
  return c;
}

void put(Writer& w, const Problem& p, const RunOptions& o, const AttentionInputs& in) {
  for (int64_t x : {int64_t(p.batch), int64_t(p.heads_q), int64_t(p.heads_kv), p.n_q, p.n_k, int64_t(p.d), int64_t(p.dv)})
    w.i64(x);
  w.i64(p.scale.has_value());
  w.f64(p.scale.value_or(0));
  w.i64(p.window.left);
  w.i64(p.window.right);
  w.i64(int64_t(p.window.align));
  w.ints(p.key_lengths);
  w.ints(p.dense_mask);
  for (int64_t x : {int64_t(o.recipe), int64_t(o.tile_m), int64_t(o.tile_n), int64_t(o.num_splits),
                    int64_t(o.l_from_fp32_p), int64_t(o.two_level_accum), int64_t(o.normalisation),
                    int64_t(o.accumulation)})
    w.i64(x);
  for (double x : {o.q_descale, o.k_descale, o.v_descale}) w.f64(x);
  w.doubles(in.q);
  w.doubles(in.k);
  w.doubles(in.v);
}

void get_case(Reader& r, Problem& p, RunOptions& o, AttentionInputs& in) {
  p.batch = int(r.i64());
  p.heads_q = int(r.i64());
  p.heads_kv = int(r.i64());
  p.n_q = r.i64();
  p.n_k = r.i64();
  p.d = int(r.i64());
  p.dv = int(r.i64());
  const bool has_scale = r.flag();
  const double scale = r.f64();
  if (has_scale) p.scale = scale;
  p.window.left = r.i64();
  p.window.right = r.i64();
  p.window.align = Align(r.i64());
  p.key_lengths = r.ints<int64_t>();
  p.dense_mask = r.ints<uint8_t>();
  o.recipe = Recipe(r.i64());
  o.tile_m = int(r.i64());
  o.tile_n = int(r.i64());
  o.num_splits = int(r.i64());
  o.l_from_fp32_p = r.flag();
  o.two_level_accum = r.flag();
  o.normalisation = Normalisation(r.i64());
  o.accumulation = Accumulation(r.i64());
  o.q_descale = r.f64();
  o.k_descale = r.f64();
  o.v_descale = r.f64();
  in.q = r.doubles();
  in.k = r.doubles();
  in.v = r.doubles();
}

// Optional fields as -1 (unknown) or their value.
void put(Writer& w, const SubjectOutput& out) {
  w.doubles(out.o);
  w.doubles(out.lse);
  w.doubles(out.o_unrounded);
  const RunPlan& pl = out.plan;
  for (int64_t x : {int64_t(pl.tile.m), int64_t(pl.tile.n), int64_t(pl.step_n), int64_t(pl.num_splits),
                    pl.l_from_fp32_p ? int64_t(*pl.l_from_fp32_p) : -1, pl.accumulation ? int64_t(*pl.accumulation) : -1,
                    pl.two_level_accum ? int64_t(*pl.two_level_accum) : -1})
    w.i64(x);
}

SubjectOutput get_output(Reader& r) {
  SubjectOutput out;
  out.o = r.doubles();
  out.lse = r.doubles();
  out.o_unrounded = r.doubles();
  RunPlan& pl = out.plan;
  pl.tile.m = int(r.i64());
  pl.tile.n = int(r.i64());
  pl.step_n = int(r.i64());
  pl.num_splits = int(r.i64());
  if (const int64_t x = r.i64(); x >= 0) pl.l_from_fp32_p = x != 0;
  if (const int64_t x = r.i64(); x >= 0) pl.accumulation = Accumulation(x);
  if (const int64_t x = r.i64(); x >= 0) pl.two_level_accum = x != 0;
  return out;
}

// Whole-buffer I/O on the socket. send() with MSG_NOSIGNAL: a dead peer is an error, not a SIGPIPE.
bool send_all(int fd, const char* data, size_t n) {
  while (n) {
    const ssize_t k = ::send(fd, data, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= size_t(k);
  }
  return true;
}

bool send_message(int fd, Message type, const std::string& payload) {
  Writer h;
  h.raw(uint8_t(type));
  h.u64(payload.size());
  return send_all(fd, h.b.data(), h.b.size()) && send_all(fd, payload.data(), payload.size());
}

// Reads exactly n bytes before the deadline (none: wait forever). Returns "" on success, else "eof" or
// "timeout" or the error.
std::string recv_all(int fd, char* data, size_t n, std::chrono::steady_clock::time_point* deadline) {
  while (n) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "timeout";
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, int(std::min<int64_t>(left.count(), 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return "timeout";
    }
    const ssize_t k = ::recv(fd, data, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) return "eof";
    if (k < 0) return std::strerror(errno);
    data += k;
    n -= size_t(k);
  }
  return "";
}

std::string recv_message(int fd, Message& type, std::string& payload, std::chrono::steady_clock::time_point* deadline) {
  char header[9];
  if (std::string e = recv_all(fd, header, 9, deadline); !e.empty()) return e;
  type = Message(uint8_t(header[0]));
  uint64_t n;
  std::memcpy(&n, header + 1, 8);
  payload.assign(n, '\0');
  return recv_all(fd, payload.data(), n, deadline);
}

std::string self_executable() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw SubjectError("cannot start a worker: /proc/self/exe is unreadable");
  return std::string(buf.data(), size_t(n));
}

}  // namespace

WorkerSubject::WorkerSubject(std::string name, double timeout_seconds) : name_(std::move(name)), timeout_(timeout_seconds) {
  start();
}

WorkerSubject::~WorkerSubject() { stop(false); }

void WorkerSubject::start() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw SubjectError(std::string("cannot start a worker: socketpair: ") + std::strerror(errno));
  // Everything the child needs is built before fork: between fork and exec it may only call
  // async-signal-safe functions (other threads may hold the allocator's locks).
  const std::string exe = self_executable();
  const std::string fd_text = "3";
  std::vector<std::string> args = {exe, "__worker", "--subject", name_, "--fd", fd_text};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    throw SubjectError(std::string("cannot start a worker: fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // The worker's fd 3 is the socket; its stdout goes to stderr, so that whatever a plugin prints
    // never mixes with this command's output. Ctrl-C reaches the whole process group: the worker
    // ignores it (the command decides when to stop), or an interrupt would read as a crash. When the
    // socket already is fd 3 (this process started with a standard stream closed), dup2 leaves it
    // close-on-exec, so the flag is cleared instead. The image is /proc/self/exe itself, which still
    // runs when the file was replaced on disk since this process started.
    const bool moved = sv[1] == 3 ? ::fcntl(3, F_SETFD, 0) == 0 : ::dup2(sv[1], 3) == 3;
    if (!moved || ::dup2(2, 1) < 0) ::_exit(127);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGINT, &ignore, nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  pid_ = pid;
  fd_ = sv[0];
  Message type;
  std::string payload;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                         std::chrono::duration<double>(std::max(timeout_, 60.0)));
  const std::string err = recv_message(fd_, type, payload, &deadline);
  if (!err.empty()) {
    const bool hung = err == "timeout";
    const std::string how = hung ? "" : reap();  // before stop(), which would reap it without saying how
    stop(hung);
    throw SubjectError("the worker for " + name_ + (hung ? " did not start in time" : " ended before it was ready: " + how));
  }
  Reader r{payload};
  if (type == kOpenError) {
    stop(false);
    throw SubjectError(r.str());
  }
  if (type != kReady) {
    stop(true);
    throw SubjectError("the worker for " + name_ + " sent an unexpected message");
  }
  try {
    caps_ = get_caps(r);
  } catch (const std::exception& e) {  // a truncated message: the worker is not usable
    stop(true);
    throw SubjectError("the worker for " + name_ + " sent unreadable capabilities: " + e.what());
  }
}

std::string WorkerSubject::reap() {
  if (pid_ < 0) return "not running";
  int status = 0;
  pid_t r;
  // A worker whose socket closed normally exits at once; one that closed it and lives on (a plugin that
  // closed fd 3) is killed after five seconds rather than waited for forever.
  bool killed = false;
  for (int i = 0;; ++i) {
    r = ::waitpid(pid_, &status, i < 100 ? WNOHANG : 0);
    if (r < 0 && errno == EINTR) continue;
    if (r != 0) break;
    if (i == 99) {
      ::kill(pid_, SIGKILL);
      killed = true;
    } else {
      ::usleep(50000);
    }
  }
  pid_ = -1;
  if (killed && r > 0) return "still running 5 s after its connection closed, and killed";
  if (r < 0) return "its status is unknown";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* what = ::strsignal(sig);
    return fmt::format("killed by signal {} ({}){}", sig, what ? what : "?", WCOREDUMP(status) ? ", core dumped" : "");
  }
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "ended";
}

void WorkerSubject::stop(bool kill_it) {
  if (fd_ >= 0) {
    ::close(fd_);  // an idle worker reads EOF and exits
    fd_ = -1;
  }
  if (pid_ <= 0) return;
  if (!kill_it) {
    // A worker still busy in the subject after five seconds is not waited for any longer.
    for (int i = 0; i < 100; ++i) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      ::usleep(50000);
    }
  }
  ::kill(pid_, SIGKILL);
  reap();
}

SubjectOutput WorkerSubject::run(const Problem& p, const AttentionInputs& in, const RunOptions& o) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pid_ < 0) start();  // the previous worker died, hung or was poisoned: a fresh one
  Writer w;
  put(w, p, o, in);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_));
  Message type = kFailed;
  std::string payload, err;
  if (!send_message(fd_, kRun, w.b)) err = "eof";
  else {
    auto d = deadline;
    err = recv_message(fd_, type, payload, &d);
  }
  if (err == "timeout") {
    stop(true);
    throw SubjectTimedOut(fmt::format("{} did not finish within {} s (time limit of a case in a worker, --case-timeout); "
                                      "the worker was killed and the campaign goes on with a fresh one",
                                      caps_.name.empty() ? name_ : caps_.name, timeout_));
  }
  if (!err.empty()) {
    ::close(fd_);
    fd_ = -1;
    const std::string how = reap();
    throw SubjectCrashed(fmt::format("{} crashed: its worker process was {} while running this case; the campaign "
                                     "goes on with a fresh worker",
                                     caps_.name.empty() ? name_ : caps_.name, how));
  }
  Reader r{payload};
  switch (type) {
    case kOutput: return get_output(r);
    case kRefused: throw SubjectRefused(r.str());
    case kNoMemory: throw SubjectOutOfMemory(r.str());
    case kSticky: {
      std::string msg = r.str();
      stop(false);
      throw SubjectSticky(msg + " (the worker was replaced by a fresh one)");
    }
    default: throw SubjectError(r.str());
  }
}

int serve_worker(Subject* subject, const std::string& open_error, int fd) {
  if (!subject) {
    Writer w;
    w.str(open_error);
    send_message(fd, kOpenError, w.b);
    return 2;
  }
  {
    Writer w;
    put(w, subject->capabilities());
    if (!send_message(fd, kReady, w.b)) return 0;
  }
  for (;;) {
    Message type = kFailed;
    std::string payload;
    if (!recv_message(fd, type, payload, nullptr).empty()) return 0;  // the parent is done
    if (type != kRun) return 2;
    Problem p;
    RunOptions o;
    AttentionInputs in;
    Reader r{payload};
    get_case(r, p, o, in);
    payload.clear();
    payload.shrink_to_fit();
    Writer w;
    Message reply = kOutput;
    try {
      put(w, subject->run(p, in, o));
    } catch (const SubjectRefused& e) {
      reply = kRefused;
      w.b.clear();
      w.str(e.reason);
    } catch (const SubjectSticky& e) {
      reply = kSticky;
      w.b.clear();
      w.str(e.what());
    } catch (const SubjectOutOfMemory& e) {
      reply = kNoMemory;
      w.b.clear();
      w.str(e.what());
    } catch (const std::bad_alloc&) {
      reply = kNoMemory;
      w.b.clear();
      w.str("the subject ran out of host memory (std::bad_alloc)");
    } catch (const std::exception& e) {
      reply = kFailed;
      w.b.clear();
      w.str(e.what());
    }
    if (!send_message(fd, reply, w.b)) return 0;
    if (reply == kSticky) return 3;  // this process is unusable for the subject
  }
}

}  // namespace fc::report
