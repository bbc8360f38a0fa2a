// gatos keygen | key show
#include <iostream>

#include "commands.h"
#include "gatos/crypto/keys.h"
#include "gatos/sys/flags.h"

namespace gatos::cli {

int RunKeygen(const Args& args) {
  static constexpr char kHelp[] =
      "usage: gatos keygen -f FILE [-C COMMENT]\n"
      "\n"
      "Creates an Ed25519 key pair in OpenSSH format: FILE (private key, mode\n"
      "0600, unencrypted, usable by ssh-keygen and git) and FILE.pub. Prints the\n"
      "key's id, ed25519:<64 hex>, used as Worker-Id and in ref names.\n"
      "Refuses to overwrite an existing FILE.\n";
  Flags flags;
  if (!flags.Parse(args, {{"file", 'f'}, {"comment", 'C'}})) return UsageError("keygen", flags.error());
  if (flags.help()) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto path = flags.Get("file");
  if (!path || path->empty()) return UsageError("keygen", "-f FILE is required");
  if (!flags.positional().empty()) return UsageError("keygen", "unexpected argument '" + flags.positional()[0] + "'");
  auto key = GenerateEd25519Key(flags.GetOr("comment", "gatos"));
  if (!key.ok()) return ReportError(key.status().message(), kExitFailure);
  Status s = WriteKeyPair(*path, *key);
  if (!s.ok()) return ReportError(s.message(), kExitFailure);
  std::cout << key->public_key().WorkerId() << '\n';
  return kExitOk;
}

int RunKeyShow(const Args& args) {
  static constexpr char kHelp[] =
      "usage: gatos key show FILE\n"
      "\n"
      "Prints the id (ed25519:<hex>) of a private key or .pub file.\n";
  Flags flags;
  if (!flags.Parse(args, {})) return UsageError("key show", flags.error());
  if (flags.help()) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (flags.positional().size() != 1) return UsageError("key show", "expects exactly one FILE");
  const std::string& path = flags.positional()[0];
  auto pub = ReadPublicKeyFile(path);
  if (!pub.ok()) {
    auto priv = ReadPrivateKeyFile(path);
    if (!priv.ok()) return ReportError(pub.status().message(), kExitUsage);
    std::cout << priv->public_key().WorkerId() << '\n';
    return kExitOk;
  }
  std::cout << pub->WorkerId() << '\n';
  return kExitOk;
}

}  // namespace gatos::cli
