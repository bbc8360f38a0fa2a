// Standard attestations of results, for supply-chain tools (docs/attestations.md):
//
//  - the DSSE envelope of the Proof-Of-Execution, rebuilt from a result
//    commit alone: payload = poe.json, payloadType = kPoePayloadType,
//    signature = Attest-Sig (PROTOCOL section 5);
//  - an in-toto Statement v1 with a SLSA provenance v1 predicate, in a DSSE
//    envelope signed by the worker key, which the worker stores in the result
//    tree at kProvenanceFileName before it calls BuildResult (so poe.json
//    lists and hashes it like every other file).
//
// Envelopes are RFC 8785 canonical JSON (no trailing newline):
//   {"payload":"<base64>","payloadType":"...","signatures":[{"keyid":"ed25519:<hex>","sig":"<base64>"}]}
// The signature is Ed25519 over DSSE v1 PAE(payloadType, payload bytes); keyid
// is the signer's worker id.
//
// Thread-safety: pure functions on value types; an ObjectLookup is called on
// the calling thread only.
#ifndef GATOS_ATTEST_H_
#define GATOS_ATTEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/git/result.h"
#include "gatos/model/poe.h"
#include "gatos/model/status.h"

namespace gatos {

// Where the worker puts the provenance envelope in a result tree.
inline constexpr char kProvenanceFileName[] = "attestation.intoto.json";
inline constexpr char kInTotoPayloadType[] = "application/vnd.in-toto+json";
inline constexpr char kInTotoStatementType[] = "https://in-toto.io/Statement/v1";
inline constexpr char kSlsaProvenanceType[] = "https://slsa.dev/provenance/v1";
inline constexpr char kGatosBuildType[] = "https://gatos.dev/job/v1";
// Envelopes larger than this are refused before any JSON parsing.
inline constexpr size_t kMaxEnvelopeBytes = 4 << 20;

// ---- DSSE ----

struct DsseSignature {
  std::string keyid;  // "" when absent
  std::string sig;    // raw signature bytes (64 for Ed25519)
};

struct DsseEnvelope {
  std::string payload_type;
  std::string payload;  // decoded payload bytes
  std::vector<DsseSignature> signatures;
};

// Canonical JSON of the envelope (payload and sigs base64-encoded).
std::string SerializeDsseEnvelope(const DsseEnvelope& env);
// Parses an envelope. InvalidArgument (naming the field) for anything but an
// object with string payloadType, base64 payload and a non-empty array of
// {keyid?: string, sig: base64}; unknown top-level fields are refused.
Result<DsseEnvelope> ParseDsseEnvelope(std::string_view json);
// A one-signature envelope: Ed25519 by `key` over PAE(payload_type, payload),
// keyid = key's worker id.
DsseEnvelope SignDsse(std::string_view payload_type, std::string payload,
                      const Ed25519PrivateKey& key);
// OK when the envelope has exactly one signature, its keyid is absent or
// equals key.WorkerId(), and it verifies for `key` over PAE. PermissionDenied
// otherwise (the message says which).
Status VerifyDsse(const DsseEnvelope& env, const Ed25519PublicKey& key);

// The PoE's DSSE envelope, rebuilt from the result commit `result_commit`
// read through `lookup`. The commit must pass CheckResultCommit first:
// PermissionDenied / DataLoss with "<check>: <detail>" when it does not,
// NotFound when the commit is absent. The output verifies with VerifyDsse
// against the Worker-Id key.
Result<std::string> PoeDsseEnvelope(const ObjectLookup& lookup, const std::string& result_commit);

// ---- in-toto provenance ----

// One result file as an in-toto subject: name = its path in the result tree.
struct ProvenanceSubject {
  std::string path;        // "stdout", "outputs/a.txt"
  std::string blake3_hex;  // 64 lowercase hex
  std::string sha256_hex;  // 64 lowercase hex
  bool operator==(const ProvenanceSubject&) const = default;
};

// The subject for one file's bytes.
ProvenanceSubject SubjectForFile(std::string path, std::string_view data);
// Subjects for the files a worker is about to pass to BuildResult: every file
// except poe.json and kProvenanceFileName, sorted by path.
std::vector<ProvenanceSubject> SubjectsForFiles(const std::vector<ResultFile>& files);

struct ProvenanceInput {
  std::string manifest_json;    // CanonicalManifest(m): canonical JSON of the hashed core;
                                // its BLAKE3 must be job_id
  std::string job_id;           // "blake3:<hex>"
  std::string job_commit;       // 40-hex job commit id ("" to leave it out)
  std::string worker_id;        // "ed25519:<hex>", the signing key's id
  int64_t lease_epoch = 0;      // the worker's epoch (>= 1)
  std::string runner_program;   // "blake3:<hex>" of the worker binary = Attest-Program
  std::string runner_version;   // = poe runner.version
  std::string runner_platform;  // = poe runner.platform
  std::string started_at;       // RFC 3339 UTC, = poe started_at
  std::string finished_at;      // RFC 3339 UTC, = poe finished_at
  std::vector<ProvenanceSubject> subjects;  // SubjectsForFiles(result files)
  std::vector<PoeInput> inputs;  // = poe inputs: the git inputs resolved for the job
};

// The in-toto Statement v1 (canonical JSON), predicateType SLSA provenance v1:
//   subject: [{name: path, digest: {blake3, sha256}}] sorted by path
//   predicate.buildDefinition: buildType kGatosBuildType,
//     externalParameters {job_id, manifest (the JSON object)},
//     internalParameters {lease_epoch, runner {program, version, platform}},
//     resolvedDependencies (only when job_commit or inputs are set):
//       [{uri: "gatos:refs/gatos/jobs/<hex>/job", digest: {gitCommit}}]
//       (when job_commit is set), then per input, in index order:
//       {name: "inputs[<index>]", uri: "git+<url>@<ref, or commit>",
//        digest: {gitCommit: <commit>}, annotations: {url, ref?}}
//   predicate.runDetails: builder {id: worker_id, version {gatos-worker},
//     builderDependencies [{uri: "gatos:worker-program", digest {blake3}}]},
//     metadata {invocationId: job_id, startedOn, finishedOn}
// InvalidArgument (naming the field) for a malformed input, including a
// manifest_json that is not canonical JSON hashing to job_id.
Result<std::string> BuildProvenanceStatement(const ProvenanceInput& in);
// BuildProvenanceStatement wrapped in a DSSE envelope (payloadType
// kInTotoPayloadType) signed by `worker_key`, whose id must equal
// in.worker_id (InvalidArgument otherwise). The bytes to store at
// kProvenanceFileName.
Result<std::string> BuildProvenanceEnvelope(const ProvenanceInput& in,
                                            const Ed25519PrivateKey& worker_key);

// What a verified provenance envelope states.
struct ProvenanceStatement {
  std::string job_id;
  std::string job_commit;  // "" when absent
  std::string worker_id;
  int64_t lease_epoch = 0;
  std::string runner_program, runner_version, runner_platform;
  std::string started_at, finished_at;
  std::string manifest_json;  // canonical JSON of externalParameters.manifest
  std::vector<ProvenanceSubject> subjects;
  std::vector<PoeInput> inputs;  // the "inputs[<n>]" resolvedDependencies, in order
  bool operator==(const ProvenanceStatement&) const = default;
};

// The statement's fields, with the checks of VerifyProvenanceEnvelope that
// follow the signature (_type, predicateType, buildType, field types, the
// invocation id, the manifest hashing to job_id). InvalidArgument naming the
// field otherwise.
Result<ProvenanceStatement> ParseProvenanceStatement(std::string_view payload);

namespace provenance_internal {
// The fields of `payload` when it is laid out exactly as
// BuildProvenanceStatement writes one (key order, the optional
// resolvedDependencies, an already canonical manifest) and passes every
// check, read without a JSON parser; nullopt otherwise, and
// ParseProvenanceStatement parses in full (ParseStatementJson), so its result
// and its errors are the same either way.
std::optional<ProvenanceStatement> ReadCanonicalStatement(std::string_view payload);
// ParseProvenanceStatement through the JSON parser, always.
Result<ProvenanceStatement> ParseStatementJson(std::string_view payload);
// The index of a dependency named "inputs[<1 to 6 digits>]"; nullopt for any
// other name.
std::optional<int64_t> InputIndex(std::string_view name);
}  // namespace provenance_internal

// Parses the envelope, checks its DSSE signature by `worker` (VerifyDsse),
// the payload type, _type, predicateType, buildType and field types, and
// that the manifest hashes to job_id. Does not compare with a result commit
// (VerifyJob does). InvalidArgument for a malformed envelope or statement,
// PermissionDenied for a bad signature.
// `signature_verified`: VerifyDsse passed on these very bytes before (an
// auditor's log replay, then its per-job pass): it is not run again.
Result<ProvenanceStatement> VerifyProvenanceEnvelope(std::string_view envelope_json,
                                                     const Ed25519PublicKey& worker,
                                                     bool signature_verified = false);

}  // namespace gatos

#endif  // GATOS_ATTEST_H_
