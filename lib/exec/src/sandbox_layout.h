// The layout of a job's root in the launcher's namespace sandbox, as mount
// operations (mount_ops.h), and the slot's long-lived parts of it
// (docs/worker-execution.md, "The launcher's namespace sandbox"):
//
// * the template: the system part of every job's root (/usr, two minimal
//   /etc, /proc with its read-only covers, /dev), built once per slot, read
//   only, at /tpl in the slot init's own mount namespace, whose root is a
//   tmpfs with the host at /oldroot; built again when a host file bound into
//   it is replaced (inotify on the sources' directories);
// * the prepared roots, without and with network: a mount namespace each
//   whose root is a read-only bind of a small tmpfs of the slot's (the
//   skeleton) holding recursive binds of the template's parts and the mount
//   points of what each job gets of its own; a job enters a copy of one
//   (job_child.cpp, EnterPreparedRoot);
// * per job: the operations the job child runs (its /tmp, /dev/shm, devpts
//   and binds; or, for a job that binds something under /etc, a whole root
//   built on a fresh tmpfs at /newroot), and its binds' mount points in the
//   skeleton, removed when a later job does not need them.
//
// Thread-safety: one SandboxLayout per slot, used by the slot's init only
// (single-threaded, the exec'd gatos-supervise). Its methods allocate: call
// them between jobs, never in a job child; ops() stays valid, unchanged,
// until the next SetJobBinds, for the job child to read.
#ifndef GATOS_EXEC_SRC_SANDBOX_LAYOUT_H_
#define GATOS_EXEC_SRC_SANDBOX_LAYOUT_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "gatos/exec/supervise_protocol.h"
#include "mount_ops.h"

namespace gatos::exec_internal {

class SandboxLayout {
 public:
  // Lists the operations, looking at the host (merged /usr, which /etc
  // entries exist). Once, before Prepare.
  void Build();

  // In the slot's init, once: its own mount namespace, whose root becomes a
  // tmpfs with the host at /oldroot, then the template and the prepared
  // roots. 0, or an errno with *step set.
  int Prepare(int* step);

  // Before each job: if a host file or directory bound into the template was
  // replaced (a package update renames a new ld.so.cache, resolv.conf or CA
  // bundle into place), the template is built again, so that a long-lived
  // slot runs its jobs with what the host has now. Changes inside a bound
  // file or directory are seen as they are made. 0, or an errno with *step
  // set (the template is then unusable).
  int Refresh(int* step);

  // Drops the previous job's binds and adds this job's. A job enters the
  // slot's prepared root unless it binds something under /etc (its /etc is
  // then a directory of binds in a root of its own); the mount points of its
  // binds are made in the prepared root's skeleton. Those made for earlier
  // jobs that this one does not need are removed first: a job's root shows
  // its own mount points only, and a slot whose jobs bind the same paths
  // (a worker's slot directories) makes them once. False when the job has
  // more binds than kMaxOps allows.
  // `tmpfs_bytes` > 0: the job's /tmp and /dev/shm are tmpfs of at most that
  // size each (its disk limit).
  bool SetJobBinds(const std::vector<exec_protocol::BindPlan>& binds, bool network,
                   int64_t tmpfs_bytes = 0);

  // This job's operations: system_ops() of the layout, then its binds.
  const MountOp* ops() const { return ops_.data(); }
  int system_ops() const { return static_cast<int>(system_ops_); }
  int size() const { return static_cast<int>(ops_.size()); }
  // The prepared root this job enters, or -1: it builds its own.
  int root_ns_fd() const { return root_ns_fd_; }

 private:
  // A job root prepared once per slot (again when the template is built
  // again), for the jobs without network and for those with: a mount
  // namespace whose root is a read-only bind of a tmpfs of the slot's (the
  // skeleton, writable here at /skel or /skel-net) holding the template's
  // parts (root_ops_). A job enters a copy of it and adds its own parts
  // (EnterPreparedRoot), instead of building a root and switching to it.
  struct PreparedRoot {
    int ns_fd = -1;
    int skel_fd = -1;  // O_PATH
    void Close();
  };

  // A source of the template as it was when the template was built.
  struct Watched {
    const char* path;      // as the layout names it, under /oldroot
    std::string resolved;  // its symlinks followed as the host would
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    bool Same(const Watched& now) const {
      return now.resolved == resolved && now.exists == exists && now.dev == dev && now.ino == ino;
    }
  };
  static Watched Look(const char* path);

  // (Re)makes both prepared roots. Without the new mount API (Linux < 5.12)
  // there are none and every job builds its root. 0, or an errno with *step.
  int PrepareRoots(int* step);

  void AddMade(int skel_fd, const std::string& path, bool dir);
  // The mount point of a job's bind in a skeleton: its missing directories
  // (and the file, for a file's bind), each recorded in made_. It stops at a
  // symlink or a file on the way; the job's own attempt then reports it.
  void MakeSkeletonPath(int skel_fd, const std::string& dest, bool dir);

  // Watches the directories that hold the template's sources (through any
  // symlink: /etc/resolv.conf may point into /run), so that the check before
  // a job is one read of an empty queue until something there is created,
  // deleted or renamed. Set before the sources are looked at.
  void Watch(const std::vector<Watched>& sources);
  // Whether anything may have changed since the last look.
  bool Changed();

  // The template: a tmpfs at /tpl, read-only once built.
  int MakeTemplate(int* step);

  const char* Keep(std::string s) {
    strings_.push_back(std::move(s));
    return strings_.back().c_str();
  }
  void Tpl(MountOp::Kind k, uint8_t flags, const char* a, const char* b) {
    tpl_ops_.push_back({k, flags, a, b});
  }
  void Job(MountOp::Kind k, uint8_t flags, const char* a, const char* b) {
    ops_.push_back({k, flags, a, b});
  }
  // A host directory: bound read-only into the template, the template's
  // copy bound into each job at the same place.
  void Bind(const std::string& src, const std::string& dst, uint8_t flags);
  void EtcEntry(const char* etc, const char* name);

  std::deque<std::string> strings_;      // stable addresses
  std::deque<std::string> job_strings_;  // this job's bind paths
  std::vector<MountOp> tpl_ops_;
  std::vector<MountOp> ops_;               // the job's: system_ops_ of them, then its binds
  std::vector<MountOp> plain_, with_etc_;  // the system ops: /etc as one bind, or entry by entry
  struct EtcName {
    std::string variant;  // "/etc" or "/etc-net"
    std::string name;
    bool dir;
  };
  std::vector<EtcName> etc_names_;
  std::vector<Watched> watched_;
  int inotify_fd_ = -1;  // or -1: every source is checked before each job
  size_t system_ops_ = 0;
  std::vector<MountOp> root_ops_;  // a prepared root's, on /newroot
  std::vector<MountOp> own_ops_;   // what a job adds to a prepared root
  PreparedRoot roots_[2];          // without network, with network
  int root_ns_fd_ = -1;            // this job's, or -1
  struct MadePath {
    int skel_fd;
    std::string path;  // relative to the skeleton
    bool dir;
    std::string key;  // MadeKey
  };
  std::vector<MadePath> made_;  // parents first
};

}  // namespace gatos::exec_internal

#endif  // GATOS_EXEC_SRC_SANDBOX_LAYOUT_H_
