// What a worker checks before it acts on a reply from "the ledger": anyone on
// the message bus can answer a request, so a worker acts only on what the
// ledger's key signed (docs/threat-model.md).
//
// A claim or renew reply states its grants (rpc::Grant: job, epoch, lease
// commit id, expiry, job commit id) and carries ONE ledger signature over
// all the grants of the reply message (rpc::GrantsPayload; a claim-batch
// reply's entries share it). VerifyReplyGrants checks that signature once;
// then, per grant, VerifyGrant checks the reply's objects against it: the
// lease commit (unsigned: its id is what the ledger signed) names this
// worker, the job and the epoch it asked for, and carries the signature of
// the very request the worker just sent (so an old genuine reply cannot be
// replayed), and job.yaml (a regular file) hashes to the job id. Only then
// does the worker run anything, and it uses the limits written in the lease
// commit the ledger signed the id of.
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

// The ok replies of one reply message (a single claim or renew reply, or
// the ok entries of a claim-batch reply, in order): their grant fields, and
// the one signature they all carry ("grant_sig"), verified once against
// `ledger_keys`. Returns the grants in order. PermissionDenied when a field
// is missing or malformed, the replies carry different signatures, or the
// signature is missing or not made by one of `ledger_keys` over exactly
// these grants (a forged, altered, dropped or added grant).
Result<std::vector<rpc::Grant>> VerifyReplyGrants(const std::vector<const nlohmann::json*>& replies,
                                                  const std::vector<Ed25519PublicKey>& ledger_keys);

// A reply's "objects" field: "" when it is missing or not a string (the
// checks then refuse the grant; reading a hostile reply never throws).
std::string ReplyObjects(const nlohmann::json& reply);

// `objects_b64`: the reply's "objects" (base64 of an object batch);
// `grant`: a grant whose signature VerifyReplyGrants verified.
// PermissionDenied for objects that do not match the grant or `sent`;
// InvalidArgument for malformed objects.
Result<VerifiedGrant> VerifyGrant(std::string_view objects_b64, const rpc::Grant& grant,
                                  const LeaseRequest& sent);

// A renew reply: the new lease commit (kind renew, same epoch, the request
// just sent) the signed grant names, and optionally the job's cancel commit,
// signed by one of `ledger_keys`.
Result<VerifiedGrant> VerifyRenewal(std::string_view objects_b64, const rpc::Grant& grant,
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
