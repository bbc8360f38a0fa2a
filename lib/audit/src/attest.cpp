#include "gatos/audit/attest.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <nlohmann/json.hpp>

#include "gatos/crypto/sha256.h"
#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json.h"
#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/time_format.h"
#include "gatos/model/poe.h"

namespace gatos {

namespace {

using nlohmann::json;

std::string B64(std::string_view s) {
  return Base64Encode(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

bool IsTagged(std::string_view s, std::string_view tag) {
  return s.substr(0, tag.size()) == tag && IsLowerHex(s.substr(tag.size()), 64);
}

// Canonical JSON of a value we built ourselves from checked strings; the
// only failure is invalid UTF-8 in a caller's string, reported with its path.
Result<std::string> Canonical(const json& j, std::string_view what) {
  auto out = CanonicalJson(j);
  if (!out.ok()) return InvalidArgumentError(std::string(what) + ": " + out.status().message());
  return out;
}

// Type-checked field access for statements we verify: errors name the path.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}
  const Status& status() const { return status_; }

  const json* Object(const json& parent, const char* key, const std::string& path) {
    const json* v = Find(parent, key, path);
    if (v && !v->is_object()) Fail(path + "." + key + ": expected an object");
    return status_.ok() ? v : nullptr;
  }
  const json* Array(const json& parent, const char* key, const std::string& path) {
    const json* v = Find(parent, key, path);
    if (v && !v->is_array()) Fail(path + "." + key + ": expected an array");
    return status_.ok() ? v : nullptr;
  }
  std::string String(const json& parent, const char* key, const std::string& path,
                     bool optional = false) {
    if (!status_.ok()) return "";
    if (optional && (!parent.is_object() || !parent.contains(key))) return "";
    const json* v = Find(parent, key, path);
    if (v && !v->is_string()) Fail(path + "." + key + ": expected a string");
    return status_.ok() ? v->get<std::string>() : "";
  }
  int64_t Integer(const json& parent, const char* key, const std::string& path) {
    const json* v = Find(parent, key, path);
    if (v && !v->is_number_integer()) Fail(path + "." + key + ": expected an integer");
    return status_.ok() ? v->get<int64_t>() : 0;
  }
  void Fail(const std::string& msg) {
    if (status_.ok()) status_ = InvalidArgumentError(where_ + ": " + msg);
  }

 private:
  const json* Find(const json& parent, const char* key, const std::string& path) {
    if (!status_.ok()) return nullptr;
    if (!parent.is_object() || !parent.contains(key)) {
      Fail(path + "." + key + ": missing");
      return nullptr;
    }
    return &parent.at(key);
  }
  std::string where_;
  Status status_;
};

}  // namespace

// ---- DSSE ----

std::string SerializeDsseEnvelope(const DsseEnvelope& env) {
  json sigs = json::array();
  for (const auto& s : env.signatures) {
    json one = {{"sig", B64(s.sig)}};
    if (!s.keyid.empty()) one["keyid"] = s.keyid;
    sigs.push_back(std::move(one));
  }
  json j = {{"payloadType", env.payload_type}, {"payload", B64(env.payload)}, {"signatures", sigs}};
  // Every string here is base64, a checked id or a protocol constant, so the
  // canonical form cannot fail; fall back to nlohmann's own dump regardless.
  auto out = CanonicalJson(j);
  return out.ok() ? *out : j.dump();
}

namespace {

// At text[*pos]: `lit`, which is skipped.
bool Skip(std::string_view text, size_t* pos, std::string_view lit) {
  if (text.substr(*pos, lit.size()) != lit) return false;
  *pos += lit.size();
  return true;
}

// At text[*pos]: the bytes up to the next '"', and that quote. Only for a
// value that must be base64, which the caller decodes: text with an escape
// or any other byte that a JSON parser might read differently is not base64.
bool RunToQuote(std::string_view text, size_t* pos, std::string_view* out) {
  if (*pos > text.size()) return false;
  const void* quote = std::memchr(text.data() + *pos, '"', text.size() - *pos);
  if (!quote) return false;
  const size_t end = static_cast<size_t>(static_cast<const char*>(quote) - text.data());
  *out = text.substr(*pos, end - *pos);
  *pos = end + 1;
  return true;
}

// At text[*pos]: the rest of a JSON string of printable ASCII other than '"'
// and '\' (so one that needs no unescaping), and its closing quote.
bool PlainString(std::string_view text, size_t* pos, std::string_view* out) {
  std::string_view run;
  if (!RunToQuote(text, pos, &run)) return false;
  // One pass without early exit over the whole run, which the compiler vectorizes.
  bool bad = false;
  for (const char ch : run) {
    const unsigned char c = static_cast<unsigned char>(ch);
    bad |= c < 0x20 || c > 0x7e || c == '\\';
  }
  if (bad) return false;
  *out = run;
  return true;
}

// The envelope exactly as SerializeDsseEnvelope writes one signature with a
// keyid (canonical JSON, plain strings), read without a JSON parser; any
// other text (nullopt) is parsed in full. For text of this form whose
// payload is base64 the parser finds the same four strings, so the outcome
// is the same (a payload that is not base64 goes to the parser too).
std::optional<std::array<std::string_view, 4>> CanonicalEnvelope(std::string_view text) {
  std::array<std::string_view, 4> f;  // payload, payloadType, keyid, sig
  size_t pos = 0;
  if (Skip(text, &pos, "{\"payload\":\"") && RunToQuote(text, &pos, &f[0]) &&
      Skip(text, &pos, ",\"payloadType\":\"") && PlainString(text, &pos, &f[1]) &&
      Skip(text, &pos, ",\"signatures\":[{\"keyid\":\"") && PlainString(text, &pos, &f[2]) &&
      Skip(text, &pos, ",\"sig\":\"") && PlainString(text, &pos, &f[3]) && Skip(text, &pos, "}]}") &&
      pos == text.size()) {
    return f;
  }
  return std::nullopt;
}

}  // namespace

Result<DsseEnvelope> ParseDsseEnvelope(std::string_view text) {
  if (text.size() > kMaxEnvelopeBytes) {
    return InvalidArgumentError("DSSE envelope: larger than " + std::to_string(kMaxEnvelopeBytes) +
                                " bytes");
  }
  std::optional<Result<Bytes>> fast_payload;
  std::optional<std::array<std::string_view, 4>> f = CanonicalEnvelope(text);
  if (f) fast_payload = Base64Decode((*f)[0]);
  if (f && fast_payload->ok()) {
    DsseEnvelope env;
    env.payload_type = std::string((*f)[1]);
    env.payload.assign((*fast_payload)->begin(), (*fast_payload)->end());
    DsseSignature sig;
    sig.keyid = std::string((*f)[2]);
    auto bytes = Base64Decode((*f)[3]);
    if (!bytes.ok()) return InvalidArgumentError("DSSE envelope: $.signatures[0].sig: not standard base64");
    sig.sig.assign(bytes->begin(), bytes->end());
    env.signatures.push_back(std::move(sig));
    return env;
  }
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("DSSE envelope: not a JSON object");
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "payloadType" && it.key() != "payload" && it.key() != "signatures") {
      return InvalidArgumentError("DSSE envelope: unknown field \"" + it.key() + "\"");
    }
  }
  Reader r("DSSE envelope");
  DsseEnvelope env;
  env.payload_type = r.String(j, "payloadType", "$");
  std::string payload_b64 = r.String(j, "payload", "$");
  const json* sigs = r.Array(j, "signatures", "$");
  GATOS_RETURN_IF_ERROR(r.status());
  auto payload = Base64Decode(payload_b64);
  if (!payload.ok()) return InvalidArgumentError("DSSE envelope: $.payload: not standard base64");
  env.payload.assign(payload->begin(), payload->end());
  if (sigs->empty()) return InvalidArgumentError("DSSE envelope: $.signatures: empty");
  for (size_t i = 0; i < sigs->size(); ++i) {
    std::string path = "$.signatures[" + std::to_string(i) + "]";
    const json& s = (*sigs)[i];
    if (!s.is_object())
      return InvalidArgumentError("DSSE envelope: " + path + ": expected an object");
    DsseSignature out;
    out.keyid = r.String(s, "keyid", path, /*optional=*/true);
    std::string sig_b64 = r.String(s, "sig", path);
    GATOS_RETURN_IF_ERROR(r.status());
    auto sig = Base64Decode(sig_b64);
    if (!sig.ok())
      return InvalidArgumentError("DSSE envelope: " + path + ".sig: not standard base64");
    out.sig.assign(sig->begin(), sig->end());
    env.signatures.push_back(std::move(out));
  }
  return env;
}

DsseEnvelope SignDsse(std::string_view payload_type, std::string payload,
                      const Ed25519PrivateKey& key) {
  DsseEnvelope env;
  env.payload_type = std::string(payload_type);
  auto sig = Ed25519Sign(key, DssePae(payload_type, payload));
  env.payload = std::move(payload);
  env.signatures.push_back(
      {key.public_key().WorkerId(), std::string(reinterpret_cast<const char*>(sig.data()), 64)});
  return env;
}

Status VerifyDsse(const DsseEnvelope& env, const Ed25519PublicKey& key) {
  if (env.signatures.size() != 1) {
    return PermissionDeniedError("the DSSE envelope has " + std::to_string(env.signatures.size()) +
                                 " signatures; exactly one, by " + key.WorkerId() +
                                 ", is expected");
  }
  const DsseSignature& s = env.signatures[0];
  if (!s.keyid.empty() && s.keyid != key.WorkerId()) {
    return PermissionDeniedError("the DSSE signature's keyid is " + s.keyid.substr(0, 80) +
                                 ", not " + key.WorkerId());
  }
  if (s.sig.size() != 64) {
    return PermissionDeniedError("the DSSE signature is " + std::to_string(s.sig.size()) +
                                 " bytes; an Ed25519 signature is 64");
  }
  Status v = Ed25519Verify(key, DssePae(env.payload_type, env.payload),
                           reinterpret_cast<const uint8_t*>(s.sig.data()));
  if (!v.ok()) {
    return PermissionDeniedError("the DSSE signature does not verify for " + key.WorkerId() +
                                 " over PAE(payloadType, payload)");
  }
  return OkStatus();
}

Result<std::string> PoeDsseEnvelope(const ObjectLookup& lookup, const std::string& result_commit) {
  ResultReport rep = CheckResultCommit(lookup, result_commit);
  if (const ResultCheck* bad = rep.first_failure()) {
    std::string msg = "result " + result_commit + " fails " + bad->name + ": " + bad->detail +
                      " (run 'gatos verify' for the full report)";
    if (bad->name == "commit" && rep.checks.size() == 1 &&
        bad->detail.find("not found") != std::string::npos) {
      return NotFoundError(msg);
    }
    return bad->name == "attest_sig" || bad->name == "commit_signature" ? PermissionDeniedError(msg)
                                                                        : DataLossError(msg);
  }
  if (rep.checks.empty()) return InternalError("CheckResultCommit ran no check");
  const ParsedResult& p = rep.parsed;
  auto sig = HexDecode(p.attest_sig_hex);
  if (!sig.ok()) return DataLossError("Attest-Sig of " + result_commit + " is not hex");
  DsseEnvelope env;
  env.payload_type = kPoePayloadType;
  env.payload = p.poe_json;
  env.signatures.push_back({"ed25519:" + p.worker_hex, std::string(sig->begin(), sig->end())});
  return SerializeDsseEnvelope(env);
}

// ---- in-toto provenance ----

ProvenanceSubject SubjectForFile(std::string path, std::string_view data) {
  return {std::move(path), DigestHex(Blake3(data)), Sha256Hex(data)};
}

std::vector<ProvenanceSubject> SubjectsForFiles(const std::vector<ResultFile>& files) {
  std::vector<ProvenanceSubject> out;
  for (const ResultFile& f : files) {
    if (f.path == kPoeFileName || f.path == kProvenanceFileName) continue;
    out.push_back(SubjectForFile(f.path, f.data));
  }
  std::sort(out.begin(), out.end(),
            [](const ProvenanceSubject& a, const ProvenanceSubject& b) { return a.path < b.path; });
  return out;
}

Result<std::string> BuildProvenanceStatement(const ProvenanceInput& in) {
  auto bad = [](const std::string& field, const std::string& what) {
    return InvalidArgumentError("provenance: " + field + ": " + what);
  };
  if (!IsTagged(in.job_id, "blake3:")) return bad("job_id", "expected blake3:<64 hex>");
  if (!IsTagged(in.worker_id, "ed25519:")) return bad("worker_id", "expected ed25519:<64 hex>");
  if (!IsTagged(in.runner_program, "blake3:")) {
    return bad("runner_program", "expected blake3:<64 hex> of the worker binary");
  }
  if (!in.job_commit.empty() && !IsLowerHex(in.job_commit, 40)) {
    return bad("job_commit", "expected a 40-hex commit id or empty");
  }
  if (in.lease_epoch < 1) return bad("lease_epoch", "expected an integer >= 1");
  if (!ParseRfc3339Millis(in.started_at).ok()) return bad("started_at", "expected RFC 3339 UTC");
  if (!ParseRfc3339Millis(in.finished_at).ok()) return bad("finished_at", "expected RFC 3339 UTC");
  json manifest = json::parse(in.manifest_json, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) {
    return bad("manifest_json", "not a JSON object (pass CanonicalManifest(manifest))");
  }
  auto canon = CanonicalJson(manifest);
  if (!canon.ok() || *canon != in.manifest_json) {
    return bad("manifest_json", "not canonical JSON (pass CanonicalManifest(manifest))");
  }
  if (Blake3Tagged(*canon) != in.job_id) {
    return bad("manifest_json", "hashes to " + Blake3Tagged(*canon) + ", not job_id " + in.job_id);
  }
  json subjects = json::array();
  std::string prev;
  for (size_t i = 0; i < in.subjects.size(); ++i) {
    const ProvenanceSubject& s = in.subjects[i];
    std::string where = "subjects[" + std::to_string(i) + "]";
    if (s.path.empty() || s.path == kPoeFileName || s.path == kProvenanceFileName) {
      return bad(where, "\"" + s.path + "\" cannot be a subject");
    }
    if (i > 0 && !(prev < s.path))
      return bad(where, "subjects must be sorted by path, no duplicates");
    if (!IsLowerHex(s.blake3_hex, 64) || !IsLowerHex(s.sha256_hex, 64)) {
      return bad(where, "digests must be 64 lowercase hex");
    }
    prev = s.path;
    subjects.push_back(
        {{"name", s.path}, {"digest", {{"blake3", s.blake3_hex}, {"sha256", s.sha256_hex}}}});
  }
  std::string job_hex = in.job_id.substr(7);
  json build_definition = {
      {"buildType", kGatosBuildType},
      {"externalParameters", {{"job_id", in.job_id}, {"manifest", manifest}}},
      {"internalParameters",
       {{"lease_epoch", in.lease_epoch},
        {"runner",
         {{"program", in.runner_program},
          {"version", in.runner_version},
          {"platform", in.runner_platform}}}}},
  };
  json deps = json::array();
  if (!in.job_commit.empty()) {
    deps.push_back({{"uri", "gatos:refs/gatos/jobs/" + job_hex + "/job"},
                    {"digest", {{"gitCommit", in.job_commit}}}});
  }
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    const PoeInput& d = in.inputs[i];
    const std::string where = "inputs[" + std::to_string(i) + "]";
    if (d.index < 0 || (i > 0 && d.index <= in.inputs[i - 1].index)) {
      return bad(where, "indexes must be >= 0 and increasing");
    }
    if (d.url.empty() || !IsGitCommitId(d.commit)) {
      return bad(where, "expected a url and a 40 or 64 hex commit");
    }
    // The uri is for people and tools; annotations say the same unambiguously.
    json annotations = {{"url", d.url}};
    if (!d.ref.empty()) annotations["ref"] = d.ref;
    deps.push_back({{"name", "inputs[" + std::to_string(d.index) + "]"},
                    {"uri", "git+" + d.url + "@" + (d.ref.empty() ? d.commit : d.ref)},
                    {"digest", {{"gitCommit", d.commit}}},
                    {"annotations", std::move(annotations)}});
  }
  if (!deps.empty()) build_definition["resolvedDependencies"] = std::move(deps);
  json statement = {
      {"_type", kInTotoStatementType},
      {"subject", subjects},
      {"predicateType", kSlsaProvenanceType},
      {"predicate",
       {{"buildDefinition", build_definition},
        {"runDetails",
         {{"builder",
           {{"id", in.worker_id},
            {"version", {{"gatos-worker", in.runner_version}}},
            {"builderDependencies",
             json::array({{{"uri", "gatos:worker-program"},
                           {"digest", {{"blake3", in.runner_program.substr(7)}}}}})}}},
          {"metadata",
           {{"invocationId", in.job_id},
            {"startedOn", in.started_at},
            {"finishedOn", in.finished_at}}}}}}},
  };
  return Canonical(statement, "provenance statement");
}

Result<std::string> BuildProvenanceEnvelope(const ProvenanceInput& in,
                                            const Ed25519PrivateKey& worker_key) {
  if (worker_key.public_key().WorkerId() != in.worker_id) {
    return InvalidArgumentError("provenance: worker_id " + in.worker_id.substr(0, 80) +
                                " is not the signing key " + worker_key.public_key().WorkerId());
  }
  GATOS_ASSIGN_OR_RETURN(std::string statement, BuildProvenanceStatement(in));
  return SerializeDsseEnvelope(SignDsse(kInTotoPayloadType, std::move(statement), worker_key));
}

Result<ProvenanceStatement> VerifyProvenanceEnvelope(std::string_view envelope_json,
                                                     const Ed25519PublicKey& worker,
                                                     bool signature_verified) {
  GATOS_ASSIGN_OR_RETURN(DsseEnvelope env, ParseDsseEnvelope(envelope_json));
  if (env.payload_type != kInTotoPayloadType) {
    return InvalidArgumentError("DSSE envelope: payloadType is \"" +
                                env.payload_type.substr(0, 80) + "\", not " + kInTotoPayloadType);
  }
  if (!signature_verified) GATOS_RETURN_IF_ERROR(VerifyDsse(env, worker));
  return ParseProvenanceStatement(env.payload);
}

Result<ProvenanceStatement> ParseProvenanceStatement(std::string_view payload) {
  if (std::optional<ProvenanceStatement> st = provenance_internal::ReadCanonicalStatement(payload)) {
    return std::move(*st);
  }
  return provenance_internal::ParseStatementJson(payload);
}

Result<ProvenanceStatement> provenance_internal::ParseStatementJson(std::string_view payload) {
  json st = json::parse(payload.begin(), payload.end(), nullptr, false);
  if (st.is_discarded() || !st.is_object()) {
    return InvalidArgumentError("in-toto statement: the payload is not a JSON object");
  }
  Reader r("in-toto statement");
  ProvenanceStatement out;
  if (r.String(st, "_type", "$") != kInTotoStatementType) {
    r.Fail(std::string("$._type: expected ") + kInTotoStatementType);
  }
  if (r.String(st, "predicateType", "$") != kSlsaProvenanceType) {
    r.Fail(std::string("$.predicateType: expected ") + kSlsaProvenanceType);
  }
  const json* subjects = r.Array(st, "subject", "$");
  const json* pred = r.Object(st, "predicate", "$");
  GATOS_RETURN_IF_ERROR(r.status());
  for (size_t i = 0; i < subjects->size(); ++i) {
    std::string path = "$.subject[" + std::to_string(i) + "]";
    const json& s = (*subjects)[i];
    ProvenanceSubject sub;
    sub.path = r.String(s, "name", path);
    const json* digest = r.Object(s, "digest", path);
    GATOS_RETURN_IF_ERROR(r.status());
    sub.blake3_hex = r.String(*digest, "blake3", path + ".digest");
    sub.sha256_hex = r.String(*digest, "sha256", path + ".digest");
    GATOS_RETURN_IF_ERROR(r.status());
    out.subjects.push_back(std::move(sub));
  }
  const json* bd = r.Object(*pred, "buildDefinition", "$.predicate");
  const json* rd = r.Object(*pred, "runDetails", "$.predicate");
  GATOS_RETURN_IF_ERROR(r.status());
  if (r.String(*bd, "buildType", "$.predicate.buildDefinition") != kGatosBuildType) {
    r.Fail(std::string("$.predicate.buildDefinition.buildType: expected ") + kGatosBuildType);
  }
  const json* ext = r.Object(*bd, "externalParameters", "$.predicate.buildDefinition");
  const json* internal = r.Object(*bd, "internalParameters", "$.predicate.buildDefinition");
  GATOS_RETURN_IF_ERROR(r.status());
  out.job_id = r.String(*ext, "job_id", "$.predicate.buildDefinition.externalParameters");
  const json* manifest =
      r.Object(*ext, "manifest", "$.predicate.buildDefinition.externalParameters");
  out.lease_epoch =
      r.Integer(*internal, "lease_epoch", "$.predicate.buildDefinition.internalParameters");
  const json* runner =
      r.Object(*internal, "runner", "$.predicate.buildDefinition.internalParameters");
  GATOS_RETURN_IF_ERROR(r.status());
  std::string rp = "$.predicate.buildDefinition.internalParameters.runner";
  out.runner_program = r.String(*runner, "program", rp);
  out.runner_version = r.String(*runner, "version", rp);
  out.runner_platform = r.String(*runner, "platform", rp);
  if (bd->contains("resolvedDependencies")) {
    const json* deps = r.Array(*bd, "resolvedDependencies", "$.predicate.buildDefinition");
    GATOS_RETURN_IF_ERROR(r.status());
    const std::string job_uri =
        out.job_id.size() > 7 ? "gatos:refs/gatos/jobs/" + out.job_id.substr(7) + "/job" : "";
    for (size_t i = 0; i < deps->size(); ++i) {
      const json& d = (*deps)[i];
      const std::string path = "$.predicate.buildDefinition.resolvedDependencies[" +
                               std::to_string(i) + "]";
      if (!d.is_object() || !d.contains("digest") || !d["digest"].is_object()) continue;
      const json& digest = d["digest"];
      if (d.contains("uri") && d["uri"] == job_uri) {
        out.job_commit = r.String(digest, "gitCommit", path + ".digest");
        continue;
      }
      if (!d.contains("name") || !d["name"].is_string() ||
          !d["name"].get<std::string>().starts_with("inputs[")) {
        continue;  // a dependency of another kind: not ours to judge
      }
      const std::string name = d["name"].get<std::string>();
      PoeInput in;
      const std::optional<int64_t> index = provenance_internal::InputIndex(name);
      if (!index) {
        r.Fail(path + ".name: \"" + name.substr(0, 40) + "\" is not inputs[<index>]");
        break;
      }
      in.index = *index;
      in.commit = r.String(digest, "gitCommit", path + ".digest");
      const json* annotations = r.Object(d, "annotations", path);
      GATOS_RETURN_IF_ERROR(r.status());
      in.url = r.String(*annotations, "url", path + ".annotations");
      if (annotations->contains("ref")) in.ref = r.String(*annotations, "ref", path + ".annotations");
      GATOS_RETURN_IF_ERROR(r.status());
      out.inputs.push_back(std::move(in));
    }
    GATOS_RETURN_IF_ERROR(r.status());
  }
  const json* builder = r.Object(*rd, "builder", "$.predicate.runDetails");
  const json* meta = r.Object(*rd, "metadata", "$.predicate.runDetails");
  GATOS_RETURN_IF_ERROR(r.status());
  out.worker_id = r.String(*builder, "id", "$.predicate.runDetails.builder");
  std::string invocation = r.String(*meta, "invocationId", "$.predicate.runDetails.metadata");
  out.started_at = r.String(*meta, "startedOn", "$.predicate.runDetails.metadata");
  out.finished_at = r.String(*meta, "finishedOn", "$.predicate.runDetails.metadata");
  GATOS_RETURN_IF_ERROR(r.status());
  if (invocation != out.job_id) {
    return InvalidArgumentError("in-toto statement: metadata.invocationId " +
                                invocation.substr(0, 80) + " differs from job_id " +
                                out.job_id.substr(0, 80));
  }
  auto canon = CanonicalJson(*manifest);
  if (!canon.ok()) {
    return InvalidArgumentError("in-toto statement: externalParameters.manifest: " +
                                canon.status().message());
  }
  out.manifest_json = *canon;
  if (Blake3Tagged(out.manifest_json) != out.job_id) {
    return InvalidArgumentError("in-toto statement: externalParameters.manifest hashes to " +
                                Blake3Tagged(out.manifest_json) + ", not to its job_id " +
                                out.job_id.substr(0, 80));
  }
  return out;
}

}  // namespace gatos
