// What a worker checks before it acts on a reply from "the ledger": anyone on
// the message bus can answer a request, so a worker acts only on what the
// ledger's key signed (docs/threat-model.md).
//
// A grant (claim reply) carries objects: the lease commit, the job commit, its
// tree and job.yaml. VerifyGrant checks that the lease commit is signed by a
// ledger key the worker was given, names this worker, the job and the epoch
// it asked for, and carries the signature of the very request the worker just
// sent (so an old genuine grant cannot be replayed), and that job.yaml (a
// regular file) hashes to the job id. Only then does the worker run
// anything, and it uses the limits written in the signed lease commit.
//
// Thread-safety: pure functions.
#ifndef GATOS_GRANT_H_
#define GATOS_GRANT_H_

#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/ledger_commits.h"
#include "gatos/model/manifest.h"
#include "gatos/model/public_key.h"
#include "gatos/model/rpc.h"
#include "gatos/model/status.h"

namespace gatos {

struct VerifiedGrant {
  std::string lease_commit;
  LeaseCommitInfo lease;
  std::string job_commit;
  std::string job_yaml;
  Manifest manifest;          // job_yaml, parsed
  std::string canonical;      // CanonicalManifest(manifest): its BLAKE3 is the job id
  std::string cancel_commit;  // renewals: a verified cancel commit of the job, "" if none
  // The key whose SSH signature the job commit carries (hex), "" if unsigned.
  // The ledger verified it when it adopted the job, and the lease commit it
  // signed names the job commit: where the job's live output goes
  // (live_output.h). Not verified again here.
  std::string submitter_hex;
};

// `objects_b64`: the reply's "objects" (base64 of an object batch).
// PermissionDenied for anything not signed by one of `ledger_keys` or not
// matching `sent`; InvalidArgument for malformed objects.
Result<VerifiedGrant> VerifyGrant(std::string_view objects_b64, const std::string& lease_commit_id,
                                  const std::vector<Ed25519PublicKey>& ledger_keys,
                                  const LeaseRequest& sent);

// A renew reply: the new lease commit (kind renew, same epoch, the request
// just sent), and optionally the job's cancel commit, both ledger-signed.
Result<VerifiedGrant> VerifyRenewal(std::string_view objects_b64,
                                    const std::string& lease_commit_id,
                                    const std::vector<Ed25519PublicKey>& ledger_keys,
                                    const LeaseRequest& sent);

// A cancel notice (core NATS, rpc::kCancelEventPrefix): true when it holds a
// ledger-signed cancel commit of `job_hex`.
Result<std::string> VerifyCancelNotice(std::string_view data,
                                       const std::vector<Ed25519PublicKey>& ledger_keys,
                                       const std::string& job_hex);

// Ledger public keys, one OpenSSH public key per line ('#' comments allowed).
Result<std::vector<Ed25519PublicKey>> ParseLedgerKeys(std::string_view text);

}  // namespace gatos

#endif  // GATOS_GRANT_H_
