// Cluster configuration (nats_cluster.h): URL lists, member lists and the
// nats-server configuration of each node. A real three-node cluster started
// from this configuration is tests/netns/multihost_test.cpp.
#include "gatos/model/nats_cluster.h"

#include <gtest/gtest.h>

#include "gatos/model/nats_auth.h"

namespace gatos {
namespace {

Policy TestPolicy() {
  Policy p;
  p.ledger_key.bytes.fill(7);
  return p;
}

TEST(SplitNatsUrlsTest, SplitsTrimsAndDropsDuplicates) {
  auto u = SplitNatsUrls(" nats://10.0.0.1:4222, nats://h2:4223 ,nats://10.0.0.1:4222");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(*u, (std::vector<std::string>{"nats://10.0.0.1:4222", "nats://h2:4223"}));
  auto t = SplitNatsUrls("tls://a.example:4222,tls://[::1]:4222");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 2u);
}

TEST(SplitNatsUrlsTest, RefusesWhatCannotBeConnectedTo) {
  for (const char* bad : {"", " , ", "nats://a:4222,", "http://a:4222", "nats://a", "nats://a:0", "nats://a:70000",
                          "nats://:4222", "nats://a b:4222", "nats://a:4222,tls://b:4222"}) {
    auto u = SplitNatsUrls(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
  EXPECT_NE(SplitNatsUrls("nats://a:4222,tls://b:4222").status().message().find("mixes"), std::string::npos);
}

TEST(ParseNatsNodesTest, DefaultsAndExplicitPorts) {
  auto n = ParseNatsNodes("n1=10.0.0.1,n2=10.0.0.2:4333,n3=host3:4222:7222");
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_EQ(n->size(), 3u);
  EXPECT_EQ((*n)[0].host, "10.0.0.1");
  EXPECT_EQ((*n)[0].client_port, 4222);
  EXPECT_EQ((*n)[0].cluster_port, 6222);
  EXPECT_EQ((*n)[1].client_port, 4333);
  EXPECT_EQ((*n)[2].cluster_port, 7222);
  EXPECT_EQ(NatsClientUrls(*n, false), "nats://10.0.0.1:4222,nats://10.0.0.2:4333,nats://host3:4222");
  EXPECT_EQ(NatsClientUrls(*n, true).substr(0, 6), "tls://");
}

TEST(ParseNatsNodesTest, RefusesBadMembers) {
  for (const char* bad : {"", "n1", "=h", "n 1=h", "n1=h,n1=h2", "n1=h:1:2,n2=h:3:2", "n1=h:x", "n1=h:1:2:3",
                          "n1=\"h\"", "n1=[::1"}) {
    EXPECT_FALSE(ParseNatsNodes(bad).ok()) << bad;
  }
}

NatsServerConfigOptions ClusterOptions() {
  NatsServerConfigOptions o;
  o.nodes = *ParseNatsNodes("n1=10.0.0.1,n2=10.0.0.2,n3=10.0.0.3");
  o.node = "n2";
  o.route_password = "0123456789abcdef0123";
  o.store_dir = "/var/lib/nats/js";
  return o;
}

TEST(NatsServerConfigTest, ClusterNodeRoutesToTheOthersWithAuthentication) {
  auto c = NatsServerConfig(ClusterOptions(), TestPolicy());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_NE(c->find("server_name: \"n2\""), std::string::npos) << *c;
  EXPECT_NE(c->find("listen: \"0.0.0.0:4222\""), std::string::npos);
  EXPECT_NE(c->find("store_dir: \"/var/lib/nats/js\""), std::string::npos);
  EXPECT_NE(c->find("name: \"gatos\""), std::string::npos);
  EXPECT_NE(c->find("listen: \"0.0.0.0:6222\""), std::string::npos);
  EXPECT_NE(c->find("\"nats-route://gatos-route:0123456789abcdef0123@10.0.0.1:6222\""), std::string::npos);
  EXPECT_NE(c->find("\"nats-route://gatos-route:0123456789abcdef0123@10.0.0.3:6222\""), std::string::npos);
  EXPECT_EQ(c->find("@10.0.0.2:6222"), std::string::npos) << "a node routes to itself";
  EXPECT_NE(c->find(NatsAuthorizationConfig(TestPolicy())), std::string::npos);
  // Deterministic.
  EXPECT_EQ(*c, *NatsServerConfig(ClusterOptions(), TestPolicy()));
}

TEST(NatsServerConfigTest, SingleServerHasNoClusterBlock) {
  NatsServerConfigOptions o;
  o.client_port = 4333;
  auto c = NatsServerConfig(o, TestPolicy());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->find("cluster {"), std::string::npos);
  EXPECT_NE(c->find("listen: \"0.0.0.0:4333\""), std::string::npos);
  EXPECT_NE(c->find("jetstream {"), std::string::npos);
  EXPECT_NE(c->find("authorization {"), std::string::npos);
}

TEST(NatsServerConfigTest, AuthorizationIncludedFromAFileGatosdRewrites) {
  auto o = ClusterOptions();
  o.auth_include = "gatos-auth.conf";
  o.pid_file = "/run/nats/nats.pid";
  auto c = NatsServerConfig(o, TestPolicy());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_NE(c->find("\ninclude gatos-auth.conf\n"), std::string::npos) << *c;
  EXPECT_NE(c->find("pid_file: \"/run/nats/nats.pid\""), std::string::npos) << *c;
  EXPECT_EQ(c->find("authorization {\n  users"), std::string::npos) << *c;
  o.auth_include = "../etc/shadow";
  EXPECT_FALSE(NatsServerConfig(o, TestPolicy()).ok());
}

TEST(NatsServerConfigTest, TlsBlocks) {
  auto o = ClusterOptions();
  o.route_password.clear();
  o.route_tls_cert = "/etc/gatos/n2.crt";
  o.route_tls_key = "/etc/gatos/n2.key";
  o.route_tls_ca = "/etc/gatos/ca.crt";
  o.tls_cert = "/etc/gatos/n2.crt";
  o.tls_key = "/etc/gatos/n2.key";
  auto c = NatsServerConfig(o, TestPolicy());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_NE(c->find("verify: true"), std::string::npos) << *c;
  EXPECT_NE(c->find("\"nats-route://10.0.0.1:6222\""), std::string::npos) << *c;
  EXPECT_EQ(c->find("password"), std::string::npos);
}

TEST(NatsServerConfigTest, RefusesConfigurationsThatDoNotWorkOrAreOpen) {
  auto open = ClusterOptions();
  open.route_password.clear();
  auto r = NatsServerConfig(open, TestPolicy());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("routes must authenticate"), std::string::npos);
  auto unknown = ClusterOptions();
  unknown.node = "n9";
  EXPECT_FALSE(NatsServerConfig(unknown, TestPolicy()).ok());
  auto quote = ClusterOptions();
  quote.store_dir = "/x\"\ninclude /etc/shadow";
  EXPECT_FALSE(NatsServerConfig(quote, TestPolicy()).ok());
  auto dollar = ClusterOptions();
  dollar.route_password = "0123456789abcdef$X";
  EXPECT_FALSE(NatsServerConfig(dollar, TestPolicy()).ok());
  auto shortpw = ClusterOptions();
  shortpw.route_password = "short";
  EXPECT_FALSE(NatsServerConfig(shortpw, TestPolicy()).ok());
  auto half = ClusterOptions();
  half.tls_cert = "/c";
  EXPECT_FALSE(NatsServerConfig(half, TestPolicy()).ok());
  auto half_route = ClusterOptions();
  half_route.route_tls_cert = "/c";
  EXPECT_FALSE(NatsServerConfig(half_route, TestPolicy()).ok());
  auto alone = ClusterOptions();
  alone.nodes.resize(1);
  alone.node = "n1";
  EXPECT_FALSE(NatsServerConfig(alone, TestPolicy()).ok());
}

}  // namespace
}  // namespace gatos
