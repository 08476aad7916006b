#include "common/ids.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <atomic>

#include "common/result.h"

namespace cp {
namespace {
constexpr char kBase32[] = "0123456789abcdefghjkmnpqrstvwxyz";

void random_bytes(unsigned char* buf, int n) {
  CP_CHECK(RAND_bytes(buf, n) == 1, "RAND_bytes failed");
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
  std::array<unsigned char, 8> rnd{};
  random_bytes(rnd.data(), static_cast<int>(rnd.size()));
  std::uint64_t r = 0;
  for (auto b : rnd) r = (r << 8) | b;
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
  CP_CHECK(EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) == 1, "EVP_Digest failed");
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
