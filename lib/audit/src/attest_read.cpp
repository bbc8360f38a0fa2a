// The in-toto statement read without a JSON parser when it is laid out
// exactly as BuildProvenanceStatement writes it (attest.h,
// provenance_internal::ReadCanonicalStatement): the auditor reads one per
// result, and nlohmann's tree cost more than the rest of the statement's
// checks. Anything else, and anything the full reader would refuse, is left
// to the JSON parser, so results and errors are the same either way.
#include <optional>
#include <string>
#include <string_view>

#include "gatos/audit/attest.h"
#include "gatos/model/blake3.h"
#include "gatos/model/canonical_json_cursor.h"

namespace gatos {
namespace provenance_internal {

std::optional<int64_t> InputIndex(std::string_view name) {
  if (!name.starts_with("inputs[") || !name.ends_with("]") || name.size() < 9 || name.size() > 14) {
    return std::nullopt;
  }
  int64_t n = 0;
  for (char c : name.substr(7, name.size() - 8)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::optional<ProvenanceStatement> ReadCanonicalStatement(std::string_view payload) {
  CanonicalJsonCursor c(payload);
  ProvenanceStatement out;
  std::string s;
  // Keys in byte order, the one optional member (resolvedDependencies) where
  // the writer puts it. Values the full reader ignores (builder.version,
  // builderDependencies) are read in the form the writer gives them.
  if (!(c.Lit("{\"_type\":") && c.Str(&s) && s == kInTotoStatementType &&
        c.Lit(",\"predicate\":{\"buildDefinition\":{\"buildType\":") && c.Str(&s) && s == kGatosBuildType &&
        c.Lit(",\"externalParameters\":{\"job_id\":") && c.Str(&out.job_id) && c.Lit(",\"manifest\":") &&
        c.Peek("{"))) {
    return std::nullopt;
  }
  // The manifest's own text, when it is canonical already: then it is what
  // the full reader's CanonicalJson gives.
  std::string_view manifest;
  if (!(c.CanonicalValue(&manifest) && c.Lit("},\"internalParameters\":{\"lease_epoch\":") &&
        c.Int(&out.lease_epoch) && c.Lit(",\"runner\":{\"platform\":") && c.Str(&out.runner_platform) &&
        c.Lit(",\"program\":") && c.Str(&out.runner_program) && c.Lit(",\"version\":") &&
        c.Str(&out.runner_version) && c.Lit("}}"))) {
    return std::nullopt;
  }
  if (c.Lit(",\"resolvedDependencies\":[") && !c.Lit("]")) {
    const std::string job_uri =
        out.job_id.size() > 7 ? "gatos:refs/gatos/jobs/" + out.job_id.substr(7) + "/job" : "";
    do {
      // The job commit: {digest: {gitCommit}, uri}; an input: {annotations:
      // {ref?, url}, digest: {gitCommit}, name, uri}. Judged as the full
      // reader judges them: by uri first, then by name.
      PoeInput in;
      std::string commit, uri, name;
      bool annotated = false;
      if (c.Lit("{\"annotations\":{")) {
        annotated = true;
        if (c.Lit("\"ref\":") && !(c.Str(&in.ref) && c.Lit(","))) return std::nullopt;
        if (!(c.Lit("\"url\":") && c.Str(&in.url) && c.Lit("},\"digest\":{\"gitCommit\":") &&
              c.Str(&commit) && c.Lit("},\"name\":") && c.Str(&name) && c.Lit(",\"uri\":") && c.Str(&uri) &&
              c.Lit("}"))) {
          return std::nullopt;
        }
      } else if (!(c.Lit("{\"digest\":{\"gitCommit\":") && c.Str(&commit) && c.Lit("},\"uri\":") &&
                   c.Str(&uri) && c.Lit("}"))) {
        return std::nullopt;
      }
      if (uri == job_uri) {
        out.job_commit = std::move(commit);
      } else if (annotated && name.starts_with("inputs[")) {
        std::optional<int64_t> index = InputIndex(name);
        if (!index) return std::nullopt;  // the full reader names the error
        in.index = *index;
        in.commit = std::move(commit);
        out.inputs.push_back(std::move(in));
      }
    } while (c.Lit(","));
    if (!c.Lit("]")) return std::nullopt;
  }
  std::string invocation;
  if (!(c.Lit("},\"runDetails\":{\"builder\":{\"builderDependencies\":[{\"digest\":{\"blake3\":") &&
        c.Str(&s) && c.Lit("},\"uri\":") && c.Str(&s) && c.Lit("}],\"id\":") && c.Str(&out.worker_id) &&
        c.Lit(",\"version\":{\"gatos-worker\":") && c.Str(&s) &&
        c.Lit("}},\"metadata\":{\"finishedOn\":") && c.Str(&out.finished_at) &&
        c.Lit(",\"invocationId\":") && c.Str(&invocation) && c.Lit(",\"startedOn\":") &&
        c.Str(&out.started_at) && c.Lit("}}},\"predicateType\":") && c.Str(&s) &&
        s == kSlsaProvenanceType && c.Lit(",\"subject\":["))) {
    return std::nullopt;
  }
  if (!c.Lit("]")) {
    do {
      ProvenanceSubject sub;
      if (!(c.Lit("{\"digest\":{\"blake3\":") && c.Str(&sub.blake3_hex) && c.Lit(",\"sha256\":") &&
            c.Str(&sub.sha256_hex) && c.Lit("},\"name\":") && c.Str(&sub.path) && c.Lit("}"))) {
        return std::nullopt;
      }
      out.subjects.push_back(std::move(sub));
    } while (c.Lit(","));
    if (!c.Lit("]")) return std::nullopt;
  }
  if (!(c.Lit("}") && c.done())) return std::nullopt;
  // The full reader's last two checks; on failure it says which.
  if (invocation != out.job_id || Blake3Tagged(manifest) != out.job_id) return std::nullopt;
  out.manifest_json = std::string(manifest);
  return out;
}

}  // namespace provenance_internal
}  // namespace gatos
