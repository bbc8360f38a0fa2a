// Keys, SSHSIG and signed commits against real OpenSSH (ssh-keygen) and git.
// Every subprocess runs with HOME/XDG_CONFIG_HOME in a temp dir and no system
// git config, so no user configuration leaks in.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/crypto/sshsig.h"
#include "gatos/git/git_commit.h"
#include "gatos/model/allowed_signers.h"
#include "test_util.h"

namespace gatos {
namespace {

namespace t = ::gatos::testing;

std::string FirstTwoFields(const std::string& line) {
  size_t a = line.find(' ');
  size_t b = line.find_first_of(" \n", a + 1);
  return line.substr(0, b);
}

std::string Chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

class SshInteropTest : public ::testing::Test {
 protected:
  t::RunOptions Opts(const std::string& cwd = "") const {
    t::RunOptions o;
    o.cwd = cwd;
    o.env = {{"HOME", dir_.path()},
             {"XDG_CONFIG_HOME", dir_.path()},
             {"GIT_CONFIG_NOSYSTEM", "1"},
             {"GIT_AUTHOR_NAME", "Test Author"},
             {"GIT_AUTHOR_EMAIL", "author@example.com"},
             {"GIT_COMMITTER_NAME", "Test Committer"},
             {"GIT_COMMITTER_EMAIL", "committer@example.com"},
             {"LC_ALL", "C"}};
    return o;
  }

  t::RunResult Run(const std::vector<std::string>& argv, const std::string& cwd = "",
                   const std::string& stdin_data = "") const {
    t::RunOptions o = Opts(cwd);
    o.stdin_data = stdin_data;
    return t::Run(argv, o);
  }

  // Writes our key pair to dir/name and returns the private key path.
  std::string WriteOurKey(const Ed25519PrivateKey& key, const std::string& name) {
    std::string path = dir_.Join(name);
    Status s = WriteKeyPair(path, key);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return path;
  }

  // `ssh-keygen -t ed25519 -N ''` into dir/name; returns the private key path.
  std::string SshKeygenKey(const std::string& name, const std::string& comment) {
    std::string path = dir_.Join(name);
    t::RunResult r =
        Run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }

  // A fresh non-bare repo with one file in a tree; returns the tree id.
  std::string InitRepoWithTree(const std::string& repo) {
    t::RunResult r = Run({"git", "init", "-q", repo});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    t::WriteFile(repo + "/hello.txt", "hello from gatos\n");
    r = Run({"git", "hash-object", "-w", "hello.txt"}, repo);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string blob = Chomp(r.out);
    r = Run({"git", "mktree"}, repo, "100644 blob " + blob + "\thello.txt\n");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Chomp(r.out);
  }

  t::TempDir dir_;
};

TEST_F(SshInteropTest, OurKeyFileLoadsInSshKeygen) {
  auto key = GenerateEd25519Key("ours@gatos");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  std::string path = WriteOurKey(*key, "id_ours");
  t::RunResult r = Run({"ssh-keygen", "-y", "-f", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(FirstTwoFields(r.out), FirstTwoFields(key->public_key().ToOpenSsh()));
  EXPECT_EQ(Chomp(r.out), key->public_key().ToOpenSsh());  // comment preserved too
  EXPECT_EQ(Chomp(t::ReadFile(path + ".pub")), key->public_key().ToOpenSsh());
}

TEST_F(SshInteropTest, SshKeygenKeyLoadsHere) {
  std::string path = SshKeygenKey("id_stock", "stock@host");
  auto key = ReadPrivateKeyFile(path);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  auto pub = ReadPublicKeyFile(path + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(key->public_key(), *pub);
  EXPECT_EQ(key->comment(), "stock@host");
  EXPECT_EQ(key->public_key().ToOpenSsh(), Chomp(t::ReadFile(path + ".pub")));
  // Our formatter reproduces ssh-keygen's file byte for byte.
  EXPECT_EQ(FormatOpenSshPrivateKey(*key), t::ReadFile(path));
}

TEST_F(SshInteropTest, EncryptedSshKeygenKeyIsRejectedClearly) {
  std::string path = dir_.Join("id_enc");
  t::RunResult r = Run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "secret pass", "-f", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto key = ReadPrivateKeyFile(path);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(key.status().message().find(path + ": encrypted keys are not supported"),
            std::string::npos)
      << key.status().ToString();
}

TEST_F(SshInteropTest, OurSignatureVerifiesWithSshKeygen) {
  auto key = GenerateEd25519Key("signer");
  ASSERT_TRUE(key.ok());
  const std::string message = "job payload\nwith two lines\n";
  auto armored = SshSigSign(*key, message, "file");
  ASSERT_TRUE(armored.ok()) << armored.status().ToString();
  std::string sig_path = dir_.Join("msg.sig");
  t::WriteFile(sig_path, *armored);
  std::string signers = dir_.Join("allowed_signers");
  t::WriteFile(signers, "worker@example.com " + key->public_key().ToOpenSsh() + "\n");

  t::RunResult r = Run({"ssh-keygen", "-Y", "verify", "-f", signers, "-I", "worker@example.com",
                        "-n", "file", "-s", sig_path},
                       "", message);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Good \"file\" signature for worker@example.com"), std::string::npos)
      << r.out;

  r = Run({"ssh-keygen", "-Y", "verify", "-f", signers, "-I", "worker@example.com", "-n", "file",
           "-s", sig_path},
          "", message + "tampered");
  EXPECT_NE(r.exit_code, 0) << r.out;
  r = Run({"ssh-keygen", "-Y", "verify", "-f", signers, "-I", "worker@example.com", "-n", "git",
           "-s", sig_path},
          "", message);
  EXPECT_NE(r.exit_code, 0) << r.out;

  // Our allowed_signers reading agrees with ssh-keygen on the same file.
  auto list = ParseAllowedSigners(t::ReadFile(signers), signers);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->IsAllowed("worker@example.com", key->public_key(), "file", 0));
}

TEST_F(SshInteropTest, AllowedSignersOptionsAgreeWithSshKeygen) {
  auto key = GenerateEd25519Key("opt");
  ASSERT_TRUE(key.ok());
  auto armored = SshSigSign(*key, "m", "file");
  ASSERT_TRUE(armored.ok());
  std::string sig_path = dir_.Join("m.sig");
  t::WriteFile(sig_path, *armored);
  struct Case {
    std::string options;
    bool allowed;
  };
  // Now is after 2020 and before 2100.
  std::vector<Case> cases = {
      {"namespaces=\"git,fi*\"", true},      {"namespaces=\"git\"", false},
      {"valid-after=\"20200101Z\"", true},   {"valid-after=\"21000101Z\"", false},
      {"valid-before=\"20200101Z\"", false}, {"cert-authority", false},
  };
  for (const Case& c : cases) {
    std::string signers = dir_.Join("signers_opt");
    std::string text =
        "*@example.com,!bad@example.com " + c.options + " " + key->public_key().ToOpenSsh() + "\n";
    t::WriteFile(signers, text);
    t::RunResult r = Run({"ssh-keygen", "-Y", "verify", "-f", signers, "-I", "w@example.com", "-n",
                          "file", "-s", sig_path},
                         "", "m");
    EXPECT_EQ(r.exit_code == 0, c.allowed) << c.options << ": " << r.out << r.err;
    auto list = ParseAllowedSigners(text, signers);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    EXPECT_EQ(list->IsAllowed("w@example.com", key->public_key(), "file", time(nullptr)), c.allowed)
        << c.options;
    r = Run({"ssh-keygen", "-Y", "verify", "-f", signers, "-I", "bad@example.com", "-n", "file",
             "-s", sig_path},
            "", "m");
    EXPECT_NE(r.exit_code, 0) << c.options;
    EXPECT_FALSE(list->IsAllowed("bad@example.com", key->public_key(), "file", time(nullptr)));
  }
}

TEST_F(SshInteropTest, SshKeygenSignatureVerifiesHere) {
  std::string key_path = SshKeygenKey("id_sign", "sign@host");
  std::string msg_path = dir_.Join("payload.txt");
  const std::string message = "payload signed by ssh-keygen\n";
  t::WriteFile(msg_path, message);
  t::RunResult r = Run({"ssh-keygen", "-Y", "sign", "-f", key_path, "-n", "file", msg_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto sig = ParseSshSignature(t::ReadFile(msg_path + ".sig"));
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  auto pub = ReadPublicKeyFile(key_path + ".pub");
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(sig->key, *pub);
  EXPECT_EQ(sig->hash_alg, "sha512");
  Status ok = SshSigVerify(*sig, message, "file");
  EXPECT_TRUE(ok.ok()) << ok.ToString();
  Status changed = SshSigVerify(*sig, message + "x", "file");
  EXPECT_EQ(changed.code(), StatusCode::kPermissionDenied) << changed.ToString();
  Status wrong_ns = SshSigVerify(*sig, message, "git");
  EXPECT_EQ(wrong_ns.code(), StatusCode::kPermissionDenied) << wrong_ns.ToString();
}

TEST_F(SshInteropTest, CreateSignedCommitPassesGitVerifyCommit) {
  auto key = GenerateEd25519Key("worker");
  ASSERT_TRUE(key.ok());
  const std::string repo = dir_.Join("repo");
  const std::string tree = InitRepoWithTree(repo);
  ASSERT_EQ(tree.size(), 40u);

  auto root = CreateSignedCommit(repo, tree, {}, "GATOS Worker", "worker@gatos.invalid",
                                 "root commit\n", *key);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  auto child = CreateSignedCommit(repo, tree, {*root}, "GATOS Worker", "worker@gatos.invalid",
                                  "result\n\nJob-Id: blake3:00\n", *key);
  ASSERT_TRUE(child.ok()) << child.status().ToString();

  const std::string good = dir_.Join("allowed_good");
  t::WriteFile(good, "worker@gatos.invalid " + key->public_key().ToOpenSsh() + "\n");
  auto other = GenerateEd25519Key("other");
  ASSERT_TRUE(other.ok());
  const std::string bad = dir_.Join("allowed_bad");
  t::WriteFile(bad, "worker@gatos.invalid " + other->public_key().ToOpenSsh() + "\n");

  for (const std::string& id : {*root, *child}) {
    t::RunResult r = Run({"git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + good,
                          "verify-commit", id},
                         repo);
    EXPECT_EQ(r.exit_code, 0) << id << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("Good \"git\" signature"), std::string::npos) << r.err;
    r = Run({"git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + bad,
             "verify-commit", id},
            repo);
    EXPECT_NE(r.exit_code, 0) << id << ": " << r.out << r.err;
  }

  // git sees the parent link, and no ref was moved.
  t::RunResult r = Run({"git", "rev-parse", *child + "^"}, repo);
  EXPECT_EQ(Chomp(r.out), *root);
  r = Run({"git", "rev-parse", "--verify", "-q", "HEAD"}, repo);
  EXPECT_NE(r.exit_code, 0) << "HEAD moved: " << r.out;
  r = Run({"git", "cat-file", "commit", *child}, repo);
  EXPECT_NE(r.out.find("\ngpgsig -----BEGIN SSH SIGNATURE-----\n "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\n \n"), std::string::npos) << "stray continuation line: " << r.out;

  // Our own extraction + verification agrees.
  auto extracted = ExtractCommitSignature(repo, *child);
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  auto sig = ParseSshSignature(extracted->signature);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_EQ(sig->key, key->public_key());
  Status v = SshSigVerify(*sig, extracted->signed_data, kGitSignatureNamespace);
  EXPECT_TRUE(v.ok()) << v.ToString();
}

TEST_F(SshInteropTest, WriteSignedCommitInBareRepo) {
  auto key = GenerateEd25519Key("bare");
  ASSERT_TRUE(key.ok());
  const std::string repo = dir_.Join("bare.git");
  t::RunResult r = Run({"git", "init", "-q", "--bare", repo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"git", "mktree"}, repo, "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string empty_tree = Chomp(r.out);
  std::string buffer = "tree " + empty_tree +
                       "\nauthor A <a@x> 1700000000 +0000\ncommitter A <a@x> 1700000000 +0000\n"
                       "\nmessage\n";
  auto id = WriteSignedCommit(repo, buffer, *key);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const std::string signers = dir_.Join("allowed");
  t::WriteFile(signers, "a@x " + key->public_key().ToOpenSsh() + "\n");
  r = Run({"git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + signers,
           "verify-commit", *id},
          repo);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  auto again =
      WriteSignedCommit(repo, t::Run({"git", "cat-file", "commit", *id}, Opts(repo)).out, *key);
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("already has a gpgsig header"), std::string::npos);
  auto missing_tree = WriteSignedCommit(
      repo, "tree 1111111111111111111111111111111111111111\n" + buffer.substr(46), *key);
  EXPECT_EQ(missing_tree.status().code(), StatusCode::kNotFound)
      << missing_tree.status().ToString();
  EXPECT_NE(missing_tree.status().message().find(
                "tree 1111111111111111111111111111111111111111 in " + repo),
            std::string::npos)
      << missing_tree.status().ToString();
}

TEST_F(SshInteropTest, StockGitSignedCommitVerifiesHere) {
  std::string key_path = SshKeygenKey("id_git", "git@host");
  const std::string repo = dir_.Join("work");
  t::RunResult r = Run({"git", "init", "-q", repo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  t::WriteFile(repo + "/job.yaml", "image: alpine\n");
  r = Run({"git", "add", "job.yaml"}, repo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"git", "-c", "gpg.format=ssh", "-c", "user.signingkey=" + key_path, "commit", "-q", "-S",
           "-m", "submit job"},
          repo);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Run({"git", "rev-parse", "HEAD"}, repo);
  std::string id = Chomp(r.out);

  auto extracted = ExtractCommitSignature(repo, id);
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  auto sig = ParseSshSignature(extracted->signature);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  auto pub = ReadPublicKeyFile(key_path + ".pub");
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(sig->key, *pub);
  Status v = SshSigVerify(*sig, extracted->signed_data, kGitSignatureNamespace);
  EXPECT_TRUE(v.ok()) << v.ToString();
  EXPECT_EQ(SshSigVerify(*sig, extracted->signed_data + "x", kGitSignatureNamespace).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(SshSigVerify(*sig, extracted->signed_data, "file").code(),
            StatusCode::kPermissionDenied);
}

TEST_F(SshInteropTest, ExtractCommitSignatureErrors) {
  const std::string repo = dir_.Join("plain");
  t::RunResult r = Run({"git", "init", "-q", repo});
  ASSERT_EQ(r.exit_code, 0);
  r = Run({"git", "commit", "-q", "--allow-empty", "-m", "unsigned"}, repo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string id = Chomp(Run({"git", "rev-parse", "HEAD"}, repo).out);

  auto unsigned_commit = ExtractCommitSignature(repo, id);
  EXPECT_EQ(unsigned_commit.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unsigned_commit.status().message().find("is not signed"), std::string::npos)
      << unsigned_commit.status().ToString();

  auto missing = ExtractCommitSignature(repo, std::string(40, 'a'));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("commit " + std::string(40, 'a')), std::string::npos)
      << missing.status().ToString();

  auto bad_id = ExtractCommitSignature(repo, "HEAD");
  EXPECT_EQ(bad_id.status().code(), StatusCode::kInvalidArgument);

  auto no_repo = ExtractCommitSignature(dir_.Join("nope"), id);
  EXPECT_EQ(no_repo.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_repo.status().message().find(dir_.Join("nope")), std::string::npos);

  auto key = GenerateEd25519Key("k");
  ASSERT_TRUE(key.ok());
  auto no_tree = CreateSignedCommit(repo, std::string(40, 'b'), {}, "n", "e@x", "m\n", *key);
  EXPECT_EQ(no_tree.status().code(), StatusCode::kNotFound) << no_tree.status().ToString();
  auto bad_parent =
      CreateSignedCommit(repo, std::string(40, 'b'), {"xyz"}, "n", "e@x", "m\n", *key);
  EXPECT_EQ(bad_parent.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gatos
