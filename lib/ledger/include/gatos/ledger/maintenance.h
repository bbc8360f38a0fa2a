// Keeping the ledger's object store in shape while it grows: every log batch
// is written as one small pack (pack_writer.h), so packs accumulate. When
// there are more than a threshold, `git repack -d --geometric=2` rolls the
// small ones into larger ones (git's own tool: it only removes packs whose
// objects it rewrote, and never drops an object). Readers keep working
// throughout; the ledger writer keeps writing new packs.
//
// Thread-safety: Repacker is NOT thread-safe; the ledger thread owns it. The
// repack itself runs as a separate, niced process.
#ifndef GATOS_MAINTENANCE_H_
#define GATOS_MAINTENANCE_H_

#include <memory>
#include <string>

#include "gatos/model/status.h"
#include "gatos/sys/process.h"

namespace gatos {

// Number of pack files in <ledger>/objects/pack.
size_t CountPacks(const std::string& ledger_dir);

class Repacker {
 public:
  explicit Repacker(std::string ledger_dir, size_t threshold = 32)
      : dir_(std::move(ledger_dir)), threshold_(threshold) {}
  // Starts a repack in the background when none runs and there are more
  // packs than the threshold. Returns true when it started one.
  bool MaybeStart();
  // Waits for a running repack (for benchmarks and shutdown).
  Status Wait();
  bool running();

 private:
  std::string dir_;
  size_t threshold_;
  Process proc_;
  bool started_ = false;
};

// Runs a repack now and waits (benchmarks that fill a ledger quickly).
Status RepackNow(const std::string& ledger_dir);

}  // namespace gatos

#endif  // GATOS_MAINTENANCE_H_
