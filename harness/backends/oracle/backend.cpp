// --backend oracle: float64 on the CPU, no dependency (oracle_runner.cpp beside it).
#include "validate/backends/registry.hpp"
#include "validate/backends/oracle_runner.hpp"

namespace validate::backends {

Backend backend_oracle() {
  Backend b;
  b.name = "oracle";
  b.description = "float64 on the CPU from the definitions, computed in the layouts under test";
  b.make = [](const BackendRequest& req) -> Result<std::unique_ptr<runners::Runner>> {
    return runners::make_oracle_runner(*req.layouts, runners::OracleOptions{req.threads});
  };
  return b;
}

}  // namespace validate::backends
