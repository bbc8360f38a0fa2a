// Service configuration files (docs/deployment.md): a YAML mapping whose keys
// are a program's long flag names and whose values are the flags' values.
//
//   # /etc/gatos/gatosd.yaml
//   ledger: /var/lib/gatos/ledger.git
//   nats: nats://10.0.0.1:4222,nats://10.0.0.2:4222
//   stream-replicas: 3
//   no-fsync: false          # a boolean flag: true gives it, false leaves it out
//   ro-bind: [/srv/a, /srv/b] # a repeatable flag: a list (or one value)
//
// Every flag can be set there; a flag given on the command line wins over the
// file (for a repeatable flag, the command line's values replace the file's).
//
// Thread-safety: pure functions (ConfigFileArgs reads the file).
#ifndef GATOS_CONFIG_FILE_H_
#define GATOS_CONFIG_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"
#include "gatos/sys/flags.h"

namespace gatos {

// The arguments `yaml` stands for ("--name", "value", ...), leaving out the
// flags `cli_args` already gives. InvalidArgument (naming `source` and the
// key) for: text that is not YAML or not a mapping, a key no spec names (or
// "config"/"help"), a list for a flag that takes one value, a mapping as a
// value, a boolean flag whose value is not true/false, an empty value.
Result<std::vector<std::string>> ConfigArgs(std::string_view yaml, const std::string& source,
                                            const std::vector<FlagSpec>& specs,
                                            const std::vector<std::string>& cli_args);

// If `args` hold --config FILE (or --config=FILE), reads FILE (at most 1 MiB)
// and returns `args` followed by ConfigArgs of its text (the --config flag
// itself is kept; give it a spec so the parser accepts it). Without
// --config, returns `args` unchanged. NotFound names a missing file.
Result<std::vector<std::string>> WithConfigFile(const std::vector<std::string>& args,
                                                const std::vector<FlagSpec>& specs);

}  // namespace gatos

#endif  // GATOS_CONFIG_FILE_H_
