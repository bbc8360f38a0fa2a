// What an auditor does with stock tools (docs/auditor-guide.md and
// docs/attestations.md run here as written): clone the ledger, verify commit
// signatures with git verify-commit and ssh-keygen -Y verify against trust
// lists taken from refs/gatos/policy, and check DSSE signatures with OpenSSL.
#include <gtest/gtest.h>

#include "audit_fixture.h"
#include "gatos/crypto/sha256.h"
#include "gatos/model/encoding.h"
#include "gatos/model/log_format.h"
#include "test_util.h"

namespace gatos::testing {
namespace {

// A ledger with results by both workers, one of them after a renewal.
struct Interop {
  LedgerFixture f;
  std::unique_ptr<Ledger> l = f.Open();
  JobRun a = RunJob(f, f.w1, {.yaml = Yaml(1)});
  JobRun b = RunJob(f, f.w2, {.yaml = Yaml(2), .renewals = 1});

  RunResult Sh(const std::string& script) {
    RunOptions o;
    o.cwd = f.dir.path();
    o.env = {{"LEDGER", f.path}, {"JOB", a.job_hex}, {"JOB_B", b.job_hex}};
    return Run({"bash", "-euo", "pipefail", "-c", script}, o);
  }
};

// docs/auditor-guide.md section 4: trust lists from the policy.
constexpr char kTrustLists[] = R"SH(
git -C ledger.git show refs/gatos/policy:workers    > workers.allowed     # result commits
git -C ledger.git show refs/gatos/policy:submitters > submitters.allowed  # job commits
echo "ledger $(git -C ledger.git show refs/gatos/policy:ledger.pub)" > ledger.allowed
)SH";

TEST(AuditInteropTest, StockGitVerifyCommitPassesOnRealResults) {
  Interop t;
  ASSERT_EQ(t.f.path, t.f.dir.Join("ledger.git"));  // the docs' layout
  // docs/auditor-guide.md sections 1 (pin the key) and 5, as written.
  RunResult r = t.Sh(std::string(kTrustLists) + R"SH(
    ROOT=$(git -C ledger.git rev-list --first-parent --max-parents=0 refs/gatos/policy)
    git -C ledger.git show "$ROOT:ledger.pub"
    v() { git -C ledger.git -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$PWD/$1" \
            verify-commit -v "$2"; }
    v workers.allowed    refs/gatos/jobs/$JOB/result
    v submitters.allowed refs/gatos/jobs/$JOB/job
    v ledger.allowed     refs/gatos/policy
    v ledger.allowed     refs/gatos/log
    v workers.allowed    refs/gatos/jobs/$JOB_B/result
    # Lease commits are unsigned: the signed log commit that records one
    # names it as a parent.
    L=$(git -C ledger.git rev-parse refs/gatos/jobs/$JOB/lease)
    LOG=$(git -C ledger.git log --first-parent --format='%H %P' refs/gatos/log |
          awk -v l="$L" '{for (i = 3; i <= NF; i++) if ($i == l) {print $1; exit}}')
    test -n "$LOG"
    v ledger.allowed "$LOG"
    if git -C ledger.git cat-file commit "$L" | grep -q '^gpgsig '; then echo "SIGNED LEASE"; fi
    git -C ledger.git for-each-ref --format='%(refname)' 'refs/gatos/jobs/*/result' |
      while read -r ref; do v workers.allowed "$ref" >/dev/null 2>&1 || echo "BAD $ref"; done
  )SH");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(t.f.ledger_key.public_key().ToOpenSsh()), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("BAD "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SIGNED LEASE"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("Good \"git\" signature for w1 with ED25519 key"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Good \"git\" signature for w2 with ED25519 key"), std::string::npos);
  EXPECT_NE(r.err.find("Good \"git\" signature for alice with ED25519 key"), std::string::npos);
  EXPECT_NE(r.err.find("Good \"git\" signature for ledger with ED25519 key"), std::string::npos);

  // A result signed by w1 does not verify against a list without w1, and the
  // loop of section 5 reports it.
  RunResult bad = t.Sh(std::string(kTrustLists) + R"SH(
    grep -v '^w1 ' workers.allowed > w2-only.allowed
    v() { git -C ledger.git -c gpg.format=ssh -c gpg.ssh.allowedSignersFile="$PWD/$1" \
            verify-commit -v "$2"; }
    git -C ledger.git for-each-ref --format='%(refname)' 'refs/gatos/jobs/*/result' |
      while read -r ref; do v w2-only.allowed "$ref" >/dev/null 2>&1 || echo "BAD $ref"; done
  )SH");
  EXPECT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_EQ(bad.out, "BAD refs/gatos/jobs/" + t.a.job_hex + "/result\n");
}

TEST(AuditInteropTest, SshKeygenAloneVerifiesAResultCommit) {
  Interop t;
  // docs/auditor-guide.md section 6, as written.
  RunResult r = t.Sh(std::string(kTrustLists) + R"SH(
    C=refs/gatos/jobs/$JOB/result
    git -C ledger.git cat-file commit $C \
      | sed -n '/^gpgsig /,/^ -----END SSH SIGNATURE-----$/p' \
      | sed -e 's/^gpgsig //' -e 's/^ //' > result.sig
    git -C ledger.git cat-file commit $C \
      | sed '/^gpgsig /,/^ -----END SSH SIGNATURE-----$/d' > result.payload
    WHO=$(ssh-keygen -Y find-principals -s result.sig -f workers.allowed)   # e.g. w1
    ssh-keygen -Y verify -f workers.allowed -I "$WHO" -n git -s result.sig < result.payload
    echo "principal: $WHO"
    # One byte changed in the payload: refused.
    sed 's/Status: succeeded/Status: failed/' result.payload > forged.payload
    if ssh-keygen -Y verify -f workers.allowed -I "$WHO" -n git -s result.sig < forged.payload; then
      echo "FORGED PAYLOAD ACCEPTED"; exit 1
    fi
  )SH");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("principal: w1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Good \"git\" signature for w1 with ED25519 key"), std::string::npos)
      << r.out << r.err;
}

TEST(AuditInteropTest, OpenSslVerifiesTheDsseEnvelopesWithTheWorkerKeyFromPolicy) {
  Interop t;
  auto poe = PoeDsseEnvelope(LedgerLookup(t.l.get()), t.a.built.commit_id);
  ASSERT_TRUE(poe.ok()) << poe.status().message();
  WriteFile(t.f.dir.Join("poe.dsse.json"), *poe);
  // docs/attestations.md, "Checking the signature without gatos" (jq, base64,
  // openssl); the worker key comes from the policy, never from the envelope.
  RunResult r = t.Sh(R"SH(
    check() {  # check ENVELOPE PRINCIPAL
      jq -r .payload "$1" | base64 -d > payload.bin
      jq -r '.signatures[0].sig' "$1" | base64 -d > sig.bin
      TYPE=$(jq -r .payloadType "$1")
      printf 'DSSEv1 %d %s %d ' "${#TYPE}" "$TYPE" "$(stat -c %s payload.bin)" > pae.bin
      cat payload.bin >> pae.bin
      git -C ledger.git show refs/gatos/policy:workers | awk -v p="$2" '$1 == p {print $3}' \
        | base64 -d | tail -c 32 > key.raw
      { printf '\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00'; cat key.raw; } > worker.der
      openssl pkeyutl -verify -pubin -keyform DER -inkey worker.der -rawin \
        -in pae.bin -sigfile sig.bin
    }
    git -C ledger.git show refs/gatos/jobs/$JOB/result:attestation.intoto.json \
      > provenance.dsse.json
    check poe.dsse.json w1                 # prints "Signature Verified Successfully"
    check provenance.dsse.json w1
    jq -r .payload provenance.dsse.json | base64 -d | jq -r '.subject[] | .name + " " + .digest.sha256'
    if check provenance.dsse.json w2; then echo "WRONG KEY ACCEPTED"; exit 1; fi
  )SH");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Signature Verified Successfully"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outputs/report.txt " + Sha256Hex("42\n")), std::string::npos) << r.out;
}

TEST(AuditInteropTest, MirrorCloneAndRefspecFetchVerifyOffline) {
  Interop t;
  // docs/auditor-guide.md, "Get a clone".
  RunResult r = t.Sh(R"SH(
    git clone --mirror "$LEDGER" mirror.git
    git -C mirror.git remote update
    git init -q fetched
    git -C fetched fetch "$LEDGER" 'refs/gatos/*:refs/gatos/*'
    git clone "$LEDGER" plain
  )SH");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* dir : {"mirror.git", "fetched"}) {
    auto l = Ledger::Open(t.f.dir.Join(dir));
    ASSERT_TRUE(l.ok()) << dir << ": " << l.status().message();
    auto all = VerifyAll(**l, {});
    ASSERT_TRUE(all.ok()) << dir << ": " << all.status().message();
    EXPECT_EQ(all->verified, 2u) << dir;
    EXPECT_EQ(all->failed, 0u) << dir;
  }
  // A plain clone has no refs/gatos/*: the auditor is told how to fetch them.
  auto plain = Ledger::Open(t.f.dir.Join("plain"));
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(VerifyAll(**plain, {}).status().code(), StatusCode::kNotFound);
}


// docs/auditor-guide.md section 11: the log chain with stock git, as written;
// then a log commit signed by another key and a sequence gap are reported.
constexpr char kLogChain[] = R"SH(
git -C ledger.git log --format=%H refs/gatos/policy | while read -r c; do
  echo "ledger namespaces=\"git\" $(git -C ledger.git show "$c:ledger.pub")"; done | sort -u > ledger.allowed
git -C ledger.git -c gpg.ssh.allowedSignersFile="$PWD/ledger.allowed" log --first-parent \
  --format='%G? %H %(trailers:key=Log-Seq,valueonly,separator=)' refs/gatos/log |
  awk 'NF < 3 { exit } $1 != "G" { print "BAD SIGNATURE", $2; bad = 1 }
       prev && $3 != prev - 1 { print "GAP before", $2; bad = 1 } { prev = $3 }
       END { if (prev != 1) { print "NO ROOT (Log-Seq 1)"; bad = 1 } exit bad }'
git -C ledger.git show refs/gatos/log:batch
)SH";

TEST(AuditInteropTest, LogChainWithStockGit) {
  Interop t;
  t.f.Close();
  RunResult r = t.Sh(kLogChain);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("result " + t.b.job_hex + " refs/gatos/jobs/" + t.b.job_hex + "/result - "),
            std::string::npos)
      << r.out;
  // A commit on top of the log signed by a worker key, with a skipped sequence.
  std::string head = *t.l->ResolveRef(kLogRef);
  CommitInfo c = *t.l->ReadCommit(head);
  LogCommitInfo info = *ParseLogMessage(c.message);
  info.seq += 2;
  auto forged = t.l->WriteCommit(c.tree, {head}, EncodeLogMessage(info), &t.f.w1, "gatos ledger",
                                 "ledger@gatos.invalid", t.f.now);
  ASSERT_TRUE(forged.ok());
  ASSERT_TRUE(t.l->UpdateRefs({{kLogRef, head, *forged}}, "tamper").ok());
  RunResult bad = t.Sh(kLogChain);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("BAD SIGNATURE " + *forged), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("GAP before " + head), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace gatos::testing
