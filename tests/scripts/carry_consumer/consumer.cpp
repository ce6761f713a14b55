// Uses each carried dependency the way validate does: fmt header-only, nlohmann_json, CLI11,
// OpenSSL's EVP SHA-256 (the manifest hashes). Prints a line the test checks.
#include <openssl/evp.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  CLI::App app{"carry consumer"};
  std::string word = "carry";
  app.add_option("--word", word);
  CLI11_PARSE(app, argc, argv);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(word.data(), word.size(), md, &len, EVP_sha256(), nullptr);
  nlohmann::json j{{"word", word}, {"sha256_bytes", len}};
  fmt::print("{} {:02x}\n", j.dump(), md[0]);
  return 0;
}
