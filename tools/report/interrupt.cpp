#include "tools/report/interrupt.h"

#include <csignal>

#include <atomic>

namespace fc::report {

namespace {
// sig_atomic_t-compatible: a lock-free atomic is async-signal-safe to store to.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_signal(int) { g_interrupted.store(true); }
}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // one-shot: the second Ctrl-C kills
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_interrupted.load(); }
void clear_interrupt() { g_interrupted.store(false); }
void request_interrupt() { g_interrupted.store(true); }

}  // namespace fc::report
