// A cgroup a test makes for itself and moves its own process into, so that
// everything it starts (a launcher's slots, gatosd, a worker and their jobs)
// runs inside it: hostile-job tests (fork bombs, big allocations) then cannot
// take down the machine that runs them, whatever regression they meet.
// Made with the code under test's own CgroupHost/JobCgroup (cgroup v2 or
// v1); the test moves back out when it is destroyed.
#ifndef GATOS_TESTS_SUPPORT_OUTER_CGROUP_H_
#define GATOS_TESTS_SUPPORT_OUTER_CGROUP_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gatos/exec/job_cgroup.h"

namespace gatos::testing {

class OuterCgroup {
 public:
  // Memory 1 GiB and 512 processes unless told otherwise.
  explicit OuterCgroup(JobLimits limits = JobLimits{1024, 512, 0, 0}) {
    CgroupHost::RemoveStale("gatos-test-outer");  // of test processes that crashed
    const std::string name = "gatos-test-outer-" + std::to_string(getpid());
    host_ = CgroupHost::Open(name);
    if (host_->version() == CgroupHost::Version::kNone) {
      ADD_FAILURE() << "this test needs a cgroup hierarchy (the CI machine has cgroup v1): "
                    << host_->Describe();
      return;
    }
    auto g = JobCgroup::Create(host_, "outer", limits);
    if (!g.ok()) {
      ADD_FAILURE() << g.status().ToString();
      return;
    }
    outer_ = std::move(*g);
    for (const std::string* d : {&host_->memory_dir(), &host_->pids_dir()}) {
      if (!d->empty()) parents_.push_back(std::filesystem::path(*d).parent_path().string());
    }
    for (int fd : outer_->procs_fds()) {
      if (write(fd, "0", 1) != 1) {
        ADD_FAILURE() << "cannot move the test into its outer cgroup";
        return;
      }
    }
    ok_ = true;
  }
  ~OuterCgroup() {
    for (const std::string& p : parents_) {
      std::ofstream(p + "/cgroup.procs") << "0";  // back where the test came from
    }
    outer_.reset();  // kills what is left in it (never this process), removes it
    host_.reset();
  }
  OuterCgroup(const OuterCgroup&) = delete;
  OuterCgroup& operator=(const OuterCgroup&) = delete;

  bool ok() const { return ok_; }

 private:
  std::shared_ptr<CgroupHost> host_;
  std::unique_ptr<JobCgroup> outer_;
  std::vector<std::string> parents_;
  bool ok_ = false;
};

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_OUTER_CGROUP_H_
