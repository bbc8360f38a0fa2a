// git hooks of the ledger repository. git runs them inside receive-pack with
// the pushed objects in a quarantine directory; pre-receive validates and
// never writes a ref, post-receive adopts accepted jobs.
#ifndef GATOS_GATOSD_HOOKS_H_
#define GATOS_GATOSD_HOOKS_H_

#include <iosfwd>
#include <string>

#include "gatos/status.h"

namespace gatos::gatosd {

// Reads "<old> <new> <ref>" lines from `in`; writes messages the pusher sees
// to `err`. Returns the hook's exit status: non-zero rejects the whole push.
int RunPreReceive(std::istream& in, std::ostream& err);
int RunPostReceive(std::istream& in, std::ostream& err);

// A metric label for a refused job commit (gatos_rejected_total{reason}):
// unsigned, untrusted_signer, bad_signature, wrong_job_id, missing_trailer,
// policy_root or bad_manifest.
std::string RejectReasonLabel(const Status& s);

}  // namespace gatos::gatosd

#endif  // GATOS_GATOSD_HOOKS_H_
