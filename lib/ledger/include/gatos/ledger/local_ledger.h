// How the ledger host's own processes (git hooks, the gatos CLI) reach the
// one writer of a ledger directory: gatosd's local socket
// <ledger>/gatos/gatosd.sock when gatosd serves the ledger, and otherwise the
// writer lock, taken in-process for the length of the request, with the same
// JobService gatosd runs. Either way the request goes through the one write
// path and ends up in the log, and the reply means durable.
//
// Socket frames: request = u32 BE subject length, subject, u32 BE data
// length, data; reply = u32 BE length, data. Who can open the socket (file
// permissions of <ledger>/gatos) may ask gatosd anything, including policy
// changes: it is the ledger host's administrator.
//
// Thread-safety: functions are safe from any thread.
#ifndef GATOS_LOCAL_LEDGER_H_
#define GATOS_LOCAL_LEDGER_H_

#include <string>
#include <vector>

#include "gatos/ledger/job_service.h"
#include "gatos/model/status.h"

namespace gatos {

inline constexpr size_t kMaxSocketFrame = 64 << 20;

std::string LedgerSocketPath(const std::string& ledger_dir);

// The ledger's push front door, <ledger>/push: the repository that stock
// `git push` targets (submissions, results, witnesses). It holds no refs and
// shares the ledger's objects directory, so receive-pack reads nothing of
// the ledger's million refs; its hooks hand every push to the one writer.
inline constexpr char kPushDirName[] = "push";
std::string LedgerPushPath(const std::string& ledger_dir);

// Blocking frame I/O on a connected stream socket. Unavailable when the peer
// closed; InvalidArgument for a frame over kMaxSocketFrame.
Status WriteRequestFrame(int fd, const std::string& subject, const std::string& data);
Result<std::pair<std::string, std::string>> ReadRequestFrame(int fd);
Status WriteReplyFrame(int fd, const std::string& data);
Result<std::string> ReadReplyFrame(int fd);

struct LocalOptions {
  int timeout_ms = 30'000;  // for gatosd's reply, and for the writer lock
  WriterOptions writer;     // when this process becomes the writer
};

// One request to the ledger's writer (see above). *via_gatosd tells which
// path answered. Unavailable when neither gatosd nor the lock answered in
// time; the reply itself may be an error reply (rpc.h).
Result<std::string> LocalLedgerRequest(const std::string& ledger_dir, const std::string& subject,
                                       const std::string& data, const LocalOptions& options,
                                       bool* via_gatosd = nullptr);

// Several requests at once (a push of many jobs): on gatosd's socket they
// are pipelined on one connection, so gatosd applies them in few log batches
// rather than one batch each; under the writer lock they are applied in
// batches in-process. replies[i] answers requests[i] (subject, data).
Result<std::vector<std::string>> LocalLedgerRequests(const std::string& ledger_dir,
                                                     const std::vector<std::pair<std::string, std::string>>& requests,
                                                     const LocalOptions& options, bool* via_gatosd = nullptr);

// Sends a request to gatosd's socket only if gatosd runs (never takes the
// writer lock); for notices such as refused pushes. Best effort: false when
// nobody answered.
bool NotifyGatosd(const std::string& ledger_dir, const std::string& subject, const std::string& data);

// The ledger key of a ledger directory (<ledger>/gatos/ledger_key). If a key
// rotation was interrupted after the policy named the new key but before the
// key file moved, the new key (ledger_key.next) is taken and moved into place.
Result<Ed25519PrivateKey> LoadLedgerKey(const std::string& ledger_dir);

}  // namespace gatos

#endif  // GATOS_LOCAL_LEDGER_H_
