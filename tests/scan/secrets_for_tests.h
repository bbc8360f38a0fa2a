// Fake but format-valid secrets built at run time, so the source tree holds
// nothing that looks like a real credential. Deterministic per seed.
#ifndef GATOS_TESTS_SCAN_SECRETS_FOR_TESTS_H_
#define GATOS_TESTS_SCAN_SECRETS_FOR_TESTS_H_

#include <cstdint>
#include <random>
#include <string>

namespace gatos::scan::testing {

class SecretMaker {
 public:
  explicit SecretMaker(uint32_t seed) : rng_(seed) {}

  std::string Chars(const std::string& alphabet, size_t n) {
    std::string out;
    std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
    for (size_t i = 0; i < n; ++i) out += alphabet[pick(rng_)];
    return out;
  }
  std::string Alnum(size_t n) {
    return Chars("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", n);
  }
  std::string Hex(size_t n) { return Chars("0123456789abcdef", n); }
  std::string Digits(size_t n) { return Chars("123456789", n); }

  std::string Aws() {
    return std::string("AK") + "IA" + Chars("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16);
  }
  std::string GithubPat() { return std::string("gh") + "p_" + Alnum(36); }
  std::string GithubFineGrained() { return std::string("github") + "_pat_" + Alnum(82); }
  std::string GitlabPat() { return std::string("glp") + "at-" + Alnum(20); }
  std::string SlackBot() {
    return std::string("xo") + "xb-" + Digits(11) + "-" + Digits(12) + "-" + Alnum(24);
  }
  std::string SlackWebhook() {
    return std::string("https://hooks.") + "slack.com/services/T" + Alnum(8) + "/B" + Alnum(8) +
           "/" + Alnum(24);
  }
  std::string Stripe() { return std::string("sk") + "_live_" + Alnum(24); }
  std::string Gcp() {
    return std::string("AI") + "za" +
           Chars("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", 35);
  }
  std::string Npm() { return std::string("np") + "m_" + Alnum(36); }
  std::string Jwt() {
    return std::string("ey") + "J" + Alnum(30) + ".ey" + Alnum(40) + "." + Alnum(43);
  }
  std::string GenericValue() { return Alnum(32); }
  // The whole block is the secret of the private-key rule.
  std::string PrivateKey() {
    std::string body;
    for (int i = 0; i < 6; ++i) {
      body += Chars("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 64) + "\n";
    }
    const std::string dashes = "-----";
    return dashes + "BEGIN RSA PRIVATE" + " KEY" + dashes + "\n" + body + dashes + "END RSA " +
           "PRIVATE KEY" + dashes;
  }

 private:
  std::mt19937 rng_;
};

}  // namespace gatos::scan::testing

#endif  // GATOS_TESTS_SCAN_SECRETS_FOR_TESTS_H_
