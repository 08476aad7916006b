#include "common/ids.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <atomic>
#include <cstdint>

#include "common/result.h"

namespace cp {
namespace {
constexpr char kBase32[] = "0123456789abcdefghjkmnpqrstvwxyz";

void random_bytes(unsigned char* buf, int n) {
  CP_CHECK(RAND_bytes(buf, n) == 1, "RAND_bytes failed");
}

// The random part of ids: they need to differ between servers sharing a
// database, not to be unguessable (secrets come from RAND_bytes). SplitMix64
// seeded once per thread from RAND_bytes; RAND_bytes for every id was a few
// percent of a submit's CPU.
std::uint64_t id_random() {
  thread_local std::uint64_t state = [] {
    std::array<unsigned char, 8> seed{};
    random_bytes(seed.data(), static_cast<int>(seed.size()));
    std::uint64_t s = 0;
    for (auto b : seed) s = (s << 8) | b;
    return s;
  }();
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Fetched once: EVP_sha256() makes OpenSSL 3 look the algorithm up on
// every digest, and a token is hashed on every request.
const EVP_MD* sha256_md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  CP_CHECK(md != nullptr, "EVP_MD_fetch(SHA256) failed");
  return md;
}
}  // namespace

std::string new_id(std::string_view prefix, Millis now) {
  std::string id(prefix);
  id += '-';
  std::uint64_t t = static_cast<std::uint64_t>(now < 0 ? 0 : now);
  char time_part[10];
  for (int i = 9; i >= 0; --i) {
    time_part[i] = kBase32[t & 31];
    t >>= 5;
  }
  id.append(time_part, 10);
  // A process-wide counter in the low bits keeps ids made in the same
  // millisecond ordered by creation; the rest is random.
  static std::atomic<std::uint32_t> counter{0};
  const std::uint64_t r = id_random();
  std::uint64_t c = counter.fetch_add(1) & 0xFFFFF;  // 20 bits = 4 chars
  std::uint64_t mixed = (c << 30) | (r & ((1ULL << 30) - 1));
  char rand_part[10];
  for (int i = 9; i >= 0; --i) {
    rand_part[i] = kBase32[mixed & 31];
    mixed >>= 5;
  }
  id.append(rand_part, 10);
  return id;
}

std::string new_secret(std::string_view prefix) {
  std::array<unsigned char, 20> buf{};
  random_bytes(buf.data(), static_cast<int>(buf.size()));
  static constexpr char hex[] = "0123456789abcdef";
  std::string s(prefix);
  for (auto b : buf) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  CP_CHECK(EVP_Digest(data.data(), data.size(), md, &len, sha256_md(), nullptr) == 1, "EVP_Digest failed");
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  s.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    s += hex[md[i] >> 4];
    s += hex[md[i] & 15];
  }
  return s;
}

bool secure_equals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace cp
