// Crash isolation: a subject run in a worker process. The worker is a fresh process (this executable
// exec'd as `flashcheck __worker`, never a fork that would share a CUDA context with its parent) that
// opens the subject and runs the cases it is sent over a socket. A worker that dies (a segfault in a
// plugin), does not answer within the time limit (a hang), or reports a sticky error is replaced by a
// fresh one for the next case; the case itself becomes a finding (SubjectCrashed, SubjectTimedOut, or
// a failed run), so a campaign goes on past a kernel that takes its process down.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include "kernels/subject.h"

namespace fc::report {

class WorkerSubject : public Subject {
 public:
  // Starts a worker for the subject `name` (a registry name) and reads its capabilities. Throws
  // SubjectError with the worker's own message when it cannot open the subject.
  WorkerSubject(std::string name, double timeout_seconds);
  ~WorkerSubject() override;

  Capabilities capabilities() const override { return caps_; }
  // One case at a time per worker.
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override;

 private:
  void start();
  void stop(bool kill_it);
  std::string reap();  // waits for the worker (at most 5 s, then kills it); how it ended, in words

  std::string name_;
  double timeout_;
  Capabilities caps_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::mutex mutex_;
};

// The worker's side: runs `subject` on each case read from `fd` until the parent closes it. Returns the
// process's exit code.
int serve_worker(Subject* subject, const std::string& open_error, int fd);

}  // namespace fc::report
