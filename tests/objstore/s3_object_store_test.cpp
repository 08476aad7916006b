// S3ObjectStore: the conformance suite against a real S3-compatible server
// (s3rver, see s3rver_fixture.h), what only S3 has (multipart uploads,
// continuation tokens, signatures, retries, addressing styles), and the
// signer against AWS's published Signature Version 4 examples.
#include "objstore/s3_object_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>

#include "common/ids.h"
#include "object_store_conformance.h"
#include "objstore/s3_xml.h"
#include "objstore/sigv4.h"
#include "s3rver_fixture.h"

namespace cp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_objstore::kS3rverBucket;
using testing_objstore::kS3rverKey;
using testing_objstore::kS3rverSecret;
using testing_objstore::S3rverProcess;
using testing_objstore::s3_tests_off;
using testing_objstore::shared_s3rver;

constexpr std::int64_t kMiB = 1024 * 1024;

// Every store gets its own prefix in the shared bucket, so each starts empty.
std::string unique_prefix() {
  static std::atomic<int> n{0};
  return "t" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

S3Options s3rver_options(const S3rverProcess& server, const std::string& prefix) {
  S3Options o;
  o.bucket = kS3rverBucket;
  o.prefix = prefix;
  o.endpoint = server.endpoint();
  o.style = S3AddressingStyle::kPath;
  o.credentials = {kS3rverKey, kS3rverSecret, ""};
  o.max_attempts = 3;
  o.retry_base_ms = 1;  // retries are tested, not waited for
  o.timeout_ms = 20000;
  return o;
}

void skip_s3() { GTEST_SKIP() << "S3 tests are off (CUBEPLANE_TEST_S3=off)"; }

std::unique_ptr<ObjectStore> make_s3rver_store() {
  if (s3_tests_off()) {
    skip_s3();
    return nullptr;
  }
  auto server = shared_s3rver();
  if (!server.ok()) {
    ADD_FAILURE() << server.error().message;
    return nullptr;
  }
  auto store = S3ObjectStore::open(s3rver_options(**server, unique_prefix()));
  if (!store.ok()) {
    ADD_FAILURE() << store.error().message;
    return nullptr;
  }
  return std::move(store).value();
}

// Where s3rver, not S3 and not this store, cannot do what the suite asks.
// (Its other gaps under concurrency, crashes and torn reads, the front in
// tools/s3rver/s3rver-sigv4.js closes by passing one request at a time.)
const std::map<std::string, std::string> kS3rverGaps = {
    {"ListIsSortedByKeyBytes",
     "s3rver lists in the order of its directory walk, not S3's byte order (it gives \"a/b\" before \"a-c\"); the "
     "local backend and real S3 pass it"},
};

}  // namespace

namespace testing_objstore {
INSTANTIATE_TEST_SUITE_P(S3, ObjectStoreConformance,
                         ::testing::Values(StoreFactory{"s3rver", &make_s3rver_store, kS3rverGaps}),
                         [](const ::testing::TestParamInfo<StoreFactory>& info) { return info.param.name; });
}  // namespace testing_objstore

namespace {

// ------------------------------------------------------- SigV4 (AWS examples)
//
// From "Signature Calculations for the Authorization Header: Transferring
// Payload in a Single Chunk" (Amazon S3 API reference, sig-v4-header-based-auth):
// key AKIAIOSFODNN7EXAMPLE, secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY,
// 2013-05-24T00:00:00Z, us-east-1, bucket examplebucket (virtual host).

const sigv4::Credentials kExampleCreds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kExampleDate = "20130524T000000Z";
constexpr const char* kExampleHost = "examplebucket.s3.amazonaws.com";

TEST(SigV4, GetObjectExample) {
  // GET /test.txt with Range: the canonical request, string to sign and Authorization match AWS's example.
  sigv4::Request req{"GET",
                     "/test.txt",
                     {},
                     {{"Host", kExampleHost},
                      {"Range", "bytes=0-9"},
                      {"x-amz-content-sha256", kEmptySha256},
                      {"x-amz-date", kExampleDate}},
                     kEmptySha256};
  EXPECT_EQ(sigv4::canonical_request(req),
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sigv4::string_to_sign(kExampleDate, sigv4::scope(kExampleDate, "us-east-1", "s3"),
                                  sigv4::canonical_request(req)),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(sigv4::authorization(kExampleCreds, req, kExampleDate, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, PutObjectExample) {
  // PUT /test$file.text: '$' is encoded in the path, a Date and an x-amz-storage-class header are signed.
  const std::string body = "Welcome to Amazon S3.";
  const std::string hash = sha256_hex(body);
  ASSERT_EQ(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  sigv4::Request req{"PUT",
                     "/" + sigv4::uri_encode_path("test$file.text"),
                     {},
                     {{"Host", kExampleHost},
                      {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                      {"x-amz-date", kExampleDate},
                      {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                      {"x-amz-content-sha256", hash}},
                     hash};
  EXPECT_EQ(req.canonical_uri, "/test%24file.text");
  EXPECT_EQ(sha256_hex(sigv4::canonical_request(req)),
            "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
  EXPECT_EQ(sigv4::authorization(kExampleCreds, req, kExampleDate, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"
            "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4, GetBucketLifecycleExample) {
  // A query parameter without a value is "lifecycle=" in the canonical query.
  sigv4::Request req{"GET",
                     "/",
                     {{"lifecycle", ""}},
                     {{"Host", kExampleHost}, {"x-amz-date", kExampleDate}, {"x-amz-content-sha256", kEmptySha256}},
                     kEmptySha256};
  EXPECT_EQ(sigv4::canonical_query(req.query), "lifecycle=");
  EXPECT_EQ(sha256_hex(sigv4::canonical_request(req)),
            "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca");
  EXPECT_THAT(sigv4::authorization(kExampleCreds, req, kExampleDate, "us-east-1", "s3"),
              HasSubstr("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"));
}

TEST(SigV4, ListObjectsExample) {
  // Query parameters are sorted by name whatever order they come in.
  sigv4::Request req{"GET",
                     "/",
                     {{"prefix", "J"}, {"max-keys", "2"}},
                     {{"Host", kExampleHost}, {"x-amz-date", kExampleDate}, {"x-amz-content-sha256", kEmptySha256}},
                     kEmptySha256};
  EXPECT_EQ(sigv4::canonical_query(req.query), "max-keys=2&prefix=J");
  EXPECT_EQ(sha256_hex(sigv4::canonical_request(req)),
            "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7");
  EXPECT_THAT(sigv4::authorization(kExampleCreds, req, kExampleDate, "us-east-1", "s3"),
              HasSubstr("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"));
}

TEST(SigV4, SigningKeyDerivation) {
  // The signing key example of the AWS General Reference (IAM, 2012-02-15).
  EXPECT_EQ(sigv4::hex(sigv4::signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam")),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

TEST(SigV4, UriEncoding) {
  // RFC 3986: unreserved bytes stay, everything else is upper-case %XX; '/' stays only in paths.
  EXPECT_EQ(sigv4::uri_encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(sigv4::uri_encode("a b+c&d=e/f"), "a%20b%2Bc%26d%3De%2Ff");
  EXPECT_EQ(sigv4::uri_encode_path("logs/a b/c+d"), "logs/a%20b/c%2Bd");
  EXPECT_EQ(sigv4::uri_encode_path("训练"), "%E8%AE%AD%E7%BB%83");
  EXPECT_EQ(sigv4::uri_encode("*!'()%"), "%2A%21%27%28%29%25");
}

TEST(SigV4, CanonicalQuerySortsEncodedNamesThenValues) {
  // Sorting is by encoded name, then value; both are encoded, '/' included.
  EXPECT_EQ(sigv4::canonical_query({{"prefix", "a/b c"}, {"list-type", "2"}, {"continuation-token", "x+y="}}),
            "continuation-token=x%2By%3D&list-type=2&prefix=a%2Fb%20c");
  EXPECT_EQ(sigv4::canonical_query({{"b", "2"}, {"a", "z"}, {"a", "1"}}), "a=1&a=z&b=2");
}

TEST(SigV4, HeaderValuesAreTrimmed) {
  // Canonical header values lose outer blanks and inner runs of spaces.
  sigv4::Request req{"GET", "/", {}, {{"Host", "h"}, {"X-Amz-Meta-A", "  a   b  "}}, kEmptySha256};
  EXPECT_THAT(sigv4::canonical_request(req), HasSubstr("\nhost:h\nx-amz-meta-a:a b\n\nhost;x-amz-meta-a\n"));
}

TEST(SigV4, AmzDate) {
  // Time in ms since the epoch -> the basic ISO 8601 form SigV4 uses.
  EXPECT_EQ(sigv4::amz_date(1'369'353'600'000), "20130524T000000Z");
  EXPECT_EQ(sigv4::amz_date(1'767'225'600'999), "20260101T000000Z");
}

TEST(SigV4, PresignedGetObjectExample) {
  // From "Authenticating Requests: Using Query Parameters" (sig-v4-query-string-auth): GET /test.txt for 86400 s.
  sigv4::Request req{"GET",
                     "/test.txt",
                     sigv4::presign_params(kExampleCreds, kExampleDate, "us-east-1", "s3", 86400),
                     {{"host", kExampleHost}},
                     "UNSIGNED-PAYLOAD"};
  const std::string query =
      "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2F"
      "aws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host";
  EXPECT_EQ(sigv4::canonical_request(req),
            "GET\n/test.txt\n" + query + "\nhost:examplebucket.s3.amazonaws.com\n\nhost\nUNSIGNED-PAYLOAD");
  EXPECT_EQ(sigv4::string_to_sign(kExampleDate, sigv4::scope(kExampleDate, "us-east-1", "s3"),
                                  sigv4::canonical_request(req)),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04");
  EXPECT_EQ(
      sigv4::presign_query(kExampleCreds, "GET", "/test.txt", kExampleHost, kExampleDate, "us-east-1", "s3", 86400),
      query + "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
}

TEST(SigV4, PresignedWithSessionTokenSignsIt) {
  // A session token is one more signed parameter, encoded and sorted with the others; the signature changes.
  sigv4::Credentials temp = kExampleCreds;
  temp.session_token = "tok/en+=";
  const std::string q =
      sigv4::presign_query(temp, "GET", "/test.txt", kExampleHost, kExampleDate, "us-east-1", "s3", 86400);
  EXPECT_THAT(q, HasSubstr("&X-Amz-Expires=86400&X-Amz-Security-Token=tok%2Fen%2B%3D&X-Amz-SignedHeaders=host"
                           "&X-Amz-Signature="));
  EXPECT_THAT(q, ::testing::Not(HasSubstr("aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")));
}

// ------------------------------------------------------------------- XML

TEST(S3Xml, ElementTextDecodesEntities) {
  // Keys come back escaped; named and numeric references are decoded, UTF-8 passes.
  std::string xml =
      "<?xml version=\"1.0\"?><ListBucketResult><KeyCount>1</KeyCount><Contents><Key>a&amp;b &lt;c&gt; "
      "&quot;d&quot; it&#39;s &#x60;e&#x60; &apos;训练&apos;</Key></Contents></ListBucketResult>";
  EXPECT_EQ(s3xml::text(xml, "Key"), "a&b <c> \"d\" it's `e` '训练'");
  EXPECT_EQ(s3xml::text(xml, "KeyCount"), "1");
  EXPECT_EQ(s3xml::root_name(xml), "ListBucketResult");
}

TEST(S3Xml, ElementsInOrderAndEmptyOnes) {
  // All elements of a name in order; <X/> and <X></X> are empty; attributes are allowed; a missing one is nullopt.
  std::string xml = "<R><C><K>1</K></C><C a=\"x\"><K>2</K></C><C/><E></E></R>";
  auto cs = s3xml::elements(xml, "C");
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(s3xml::text(cs[0], "K"), "1");
  EXPECT_EQ(s3xml::text(cs[1], "K"), "2");
  EXPECT_EQ(cs[2], "");
  EXPECT_EQ(s3xml::text(xml, "E"), "");
  EXPECT_EQ(s3xml::text(xml, "Missing"), std::nullopt);
}

TEST(S3Xml, OddTextIsKept) {
  // An '&' that starts no reference stays; CDATA is taken as is.
  EXPECT_EQ(s3xml::decode("a & b &unknown; &#xZZ; &#0;"), "a & b &unknown; &#xZZ; &#0;");
  EXPECT_EQ(s3xml::decode("<![CDATA[a&amp;<b>]]>&amp;"), "a&amp;<b>&");
  EXPECT_EQ(s3xml::escape("a&<>\"'"), "a&amp;&lt;&gt;&quot;&apos;");
  EXPECT_EQ(s3xml::decode(s3xml::escape("x & y < \"z\"")), "x & y < \"z\"");
}

// ------------------------------------------------------------- URL, target

TEST(S3Url, FullUrl) {
  // Every parameter is read; the prefix loses its trailing slash.
  auto o = parse_s3_url("s3://my-bucket/cube/objects/?endpoint=http://127.0.0.1:4568&region=eu-west-1&style=virtual"
                        "&multipart_threshold=1048576");
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->bucket, "my-bucket");
  EXPECT_EQ(o->prefix, "cube/objects");
  EXPECT_EQ(o->endpoint, "http://127.0.0.1:4568");
  EXPECT_EQ(o->region, "eu-west-1");
  EXPECT_EQ(o->style, S3AddressingStyle::kVirtual);
  EXPECT_EQ(o->multipart_threshold, 1048576);
}

TEST(S3Url, Defaults) {
  // A custom endpoint defaults to path style; no endpoint means AWS and virtual hosts; 8 MiB threshold.
  auto custom = parse_s3_url("s3://bucket?endpoint=https://minio.internal:9000/");
  ASSERT_TRUE(custom.ok()) << custom.error().message;
  EXPECT_EQ(custom->style, S3AddressingStyle::kPath);
  EXPECT_EQ(custom->endpoint, "https://minio.internal:9000");
  EXPECT_EQ(custom->prefix, "");
  EXPECT_EQ(custom->region, "us-east-1");
  EXPECT_EQ(custom->multipart_threshold, 8 * kMiB);
  auto aws = parse_s3_url("s3://bucket");
  ASSERT_TRUE(aws.ok());
  EXPECT_EQ(aws->style, S3AddressingStyle::kVirtual);
  EXPECT_EQ(aws->endpoint, "");
}

TEST(S3Url, BadUrlsAreRefused) {
  // Bad bucket names, prefixes, parameters and values are unsupported_objects_url, 400, in both languages.
  for (const char* url :
       {"s3://", "s3://ab", "s3://Upper", "s3://under_score", "s3://-lead", "s3://b..b", "s3://bucket//x",
        "s3://bucket/a/../b", "s3://bucket?endpoint=ftp://x", "s3://bucket?endpoint=http://x/path",
        "s3://bucket?style=diagonal", "s3://bucket?multipart_threshold=0", "s3://bucket?multipart_threshold=1k",
        "s3://bucket?region=US_EAST", "s3://bucket?secret=x"}) {
    auto o = parse_s3_url(url);
    ASSERT_FALSE(o.ok()) << url;
    EXPECT_EQ(o.error().code, "unsupported_objects_url") << url;
    EXPECT_EQ(o.error().status, 400);
    EXPECT_FALSE(o.error().message_zh.empty());
  }
}

std::unique_ptr<S3ObjectStore> offline_store(S3Options o) {
  o.credentials = {"AKID", "SECRET", ""};
  auto s = S3ObjectStore::open(std::move(o));
  if (!s.ok()) ADD_FAILURE() << s.error().message;
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(S3Target, PathStyle) {
  // Path style: the bucket is the first path segment, the Host is the endpoint's.
  S3Options o;
  o.bucket = "cp-test";
  o.endpoint = "http://127.0.0.1:4568";
  auto s = offline_store(o);
  ASSERT_NE(s, nullptr);
  auto t = s->target("logs/a b/c+d", {{"uploadId", "x/y"}, {"partNumber", "2"}});
  EXPECT_EQ(t.host, "127.0.0.1:4568");
  EXPECT_EQ(t.canonical_uri, "/cp-test/logs/a%20b/c%2Bd");
  EXPECT_EQ(t.url, "http://127.0.0.1:4568/cp-test/logs/a%20b/c%2Bd?partNumber=2&uploadId=x%2Fy");
  auto bucket = s->target("", {{"list-type", "2"}});
  EXPECT_EQ(bucket.url, "http://127.0.0.1:4568/cp-test?list-type=2");
  EXPECT_EQ(bucket.canonical_uri, "/cp-test");
}

TEST(S3Target, VirtualHostStyle) {
  // Virtual-host style: the bucket is the first label of the Host; the path is the key alone.
  S3Options o;
  o.bucket = "cp-test";
  o.endpoint = "https://s3.example.com:9000";
  o.style = S3AddressingStyle::kVirtual;
  auto s = offline_store(o);
  ASSERT_NE(s, nullptr);
  auto t = s->target("训练/x y");
  EXPECT_EQ(t.host, "cp-test.s3.example.com:9000");
  EXPECT_EQ(t.canonical_uri, "/%E8%AE%AD%E7%BB%83/x%20y");
  EXPECT_EQ(t.url, "https://cp-test.s3.example.com:9000/%E8%AE%AD%E7%BB%83/x%20y");
  auto bucket = s->target("", {{"list-type", "2"}, {"prefix", "a/"}});
  EXPECT_EQ(bucket.url, "https://cp-test.s3.example.com:9000/?list-type=2&prefix=a%2F");
  EXPECT_EQ(bucket.canonical_uri, "/");
}

TEST(S3Target, AwsDefaultEndpoint) {
  // Without an endpoint the store talks to AWS in its region, by virtual host.
  auto o = parse_s3_url("s3://cp-test/pre?region=eu-central-1");
  ASSERT_TRUE(o.ok());
  auto s = offline_store(*o);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->target("pre/k").url, "https://cp-test.s3.eu-central-1.amazonaws.com/pre/k");
  EXPECT_EQ(s->url(),
            "s3://cp-test/pre?endpoint=https://s3.eu-central-1.amazonaws.com&region=eu-central-1&style=virtual");
}

TEST(S3Target, VirtualHostNeedsAHostName) {
  // "bucket.127.0.0.1" is no host: virtual style with an IP endpoint is refused up front.
  S3Options o;
  o.bucket = "cp-test";
  o.endpoint = "http://127.0.0.1:4568";
  o.style = S3AddressingStyle::kVirtual;
  o.credentials = {"AKID", "SECRET", ""};
  auto s = S3ObjectStore::open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("style=path"));
}

TEST(S3Store, UrlRoundTrips) {
  // url() gives back a URL that parses to the same store.
  auto o = parse_s3_url("s3://cp-test/a/b?endpoint=http://localhost:9000&multipart_threshold=6291456");
  ASSERT_TRUE(o.ok());
  auto s = offline_store(*o);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->url(), "s3://cp-test/a/b?endpoint=http://localhost:9000&region=us-east-1&style=path"
                      "&multipart_threshold=6291456");
  auto again = parse_s3_url(s->url());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->prefix, "a/b");
  EXPECT_EQ(again->multipart_threshold, 6291456);
}

TEST(S3Store, VersionIdFromHeaders) {
  // x-amz-version-id is the version of a versioned bucket; absent or "null" (unversioned, suspended) is "".
  // (s3rver has no versioning: it answers NotImplemented to ?versioning, so this is checked on the parser.)
  HttpResponse r;
  EXPECT_EQ(s3_version_id(r), "");
  r.headers["x-amz-version-id"] = "3/L4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo";
  EXPECT_EQ(s3_version_id(r), "3/L4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo");
  r.headers["x-amz-version-id"] = "null";
  EXPECT_EQ(s3_version_id(r), "");
}

TEST(S3Store, ReadUrlIsAPresignedGet) {
  // read_url signs a GET of the prefixed, encoded key at the clock's time; no request is made.
  SimulatedClock clock(1'369'353'600'000);  // 2013-05-24T00:00:00Z
  S3Options o;
  o.bucket = "cp-test";
  o.prefix = "pre";
  o.endpoint = "http://127.0.0.1:1";  // nothing listens there
  o.clock = &clock;
  auto s = offline_store(o);
  ASSERT_NE(s, nullptr);
  auto u = s->read_url("beacon/a b", 600);
  ASSERT_TRUE(u.ok()) << u.error().message;
  const S3Target t = s->target("pre/beacon/a b");
  EXPECT_EQ(*u, t.url + "?" +
                    sigv4::presign_query({"AKID", "SECRET", ""}, "GET", t.canonical_uri, t.host, "20130524T000000Z",
                                         "us-east-1", "s3", 600));
  EXPECT_THAT(*u, ::testing::StartsWith("http://127.0.0.1:1/cp-test/pre/beacon/a%20b?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                                        "&X-Amz-Credential=AKID%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
                                        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=600&X-Amz-SignedHeaders=host"
                                        "&X-Amz-Signature="));
}

TEST(S3Store, ReadUrlTtlIsClampedToS3sRange) {
  // S3 takes 1 s to 7 days: longer asks get 7 days (kMaxReadUrlTtlS), zero or negative ones 1 s.
  S3Options o;
  o.bucket = "cp-test";
  o.endpoint = "http://127.0.0.1:1";
  auto s = offline_store(o);
  ASSERT_NE(s, nullptr);
  EXPECT_THAT(s->read_url("k", 30 * 86400).value(), HasSubstr("&X-Amz-Expires=604800&"));
  EXPECT_THAT(s->read_url("k", kMaxReadUrlTtlS).value(), HasSubstr("&X-Amz-Expires=604800&"));
  EXPECT_THAT(s->read_url("k", 0).value(), HasSubstr("&X-Amz-Expires=1&"));
  EXPECT_THAT(s->read_url("k", -5).value(), HasSubstr("&X-Amz-Expires=1&"));
}

TEST(S3Store, ReadUrlRefusesBadKeys) {
  // Keys are checked as put's: invalid_object_key, 400, in both languages.
  S3Options o;
  o.bucket = "cp-test";
  o.endpoint = "http://127.0.0.1:1";
  auto s = offline_store(o);
  ASSERT_NE(s, nullptr);
  for (const char* key : {"", "/abs", "a/../b", "a//b"}) {
    auto u = s->read_url(key, 60);
    ASSERT_FALSE(u.ok()) << key;
    EXPECT_EQ(u.error().code, "invalid_object_key") << key;
    EXPECT_EQ(u.error().status, 400);
    EXPECT_FALSE(u.error().message_zh.empty());
  }
}

// Restores an environment variable when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(OpenObjectStore, S3NeedsCredentials) {
  // Without AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY an s3:// URL is refused, saying which variables to set.
  ScopedEnv id("AWS_ACCESS_KEY_ID", nullptr);
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", nullptr);
  auto s = open_object_store("s3://cp-test?endpoint=http://127.0.0.1:1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "object_store_credentials_missing");
  EXPECT_THAT(s.error().message, HasSubstr("AWS_SECRET_ACCESS_KEY"));
  EXPECT_FALSE(s.error().message_zh.empty());
}

TEST(OpenObjectStore, S3BadUrlIsRefused) {
  // A malformed s3:// URL is unsupported_objects_url before credentials are looked at.
  auto s = open_object_store("s3://cp-test?colour=blue");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "unsupported_objects_url");
}

// ------------------------------------------------------ against s3rver

class S3rverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (s3_tests_off()) GTEST_SKIP() << "S3 tests are off (CUBEPLANE_TEST_S3=off)";
    auto server = shared_s3rver();
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = *server;
    prefix_ = unique_prefix();
  }

  S3Options options() const { return s3rver_options(*server_, prefix_); }

  std::unique_ptr<S3ObjectStore> open(const S3Options& o) {
    auto s = S3ObjectStore::open(o);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // The signed requests of this test (its prefix is in each URL), in order.
  std::vector<std::string> requests_of_this_test() const {
    std::vector<std::string> out;
    std::string log = server_->requests();
    std::size_t start = 0;
    while (start < log.size()) {
      std::size_t end = log.find('\n', start);
      if (end == std::string::npos) end = log.size();
      std::string line = log.substr(start, end - start);
      bool object = line.find("/" + prefix_ + "/") != std::string::npos;
      bool listing = line.find("=" + prefix_ + "%2F") != std::string::npos;
      if (object || listing) out.push_back(line);
      start = end + 1;
    }
    return out;
  }

  static long count(const std::vector<std::string>& lines, const std::string& needle) {
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(needle) != l.npos; });
  }

  S3rverProcess* server_ = nullptr;
  std::string prefix_;
};

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (auto& ch : out) ch = static_cast<char>(rng() & 0xff);
  return out;
}

TEST_F(S3rverTest, MultipartUploadAboveTheThreshold) {
  // A 12 MiB object with a 5 MiB threshold goes up in three parts (5, 5, 2 MiB) and reads back byte for byte.
  S3Options o = options();
  o.multipart_threshold = 5 * kMiB;
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  const std::string data = random_bytes(12 * kMiB, 7);
  auto put = store->put("checkpoints/model.bin", data);
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_EQ(put->size, 12 * kMiB);
  auto got = store->get("checkpoints/model.bin");
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(got->value().size(), data.size());
  EXPECT_TRUE(got->value() == data) << "multipart object differs from what was put";
  auto listed = store->list("checkpoints/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].size, 12 * kMiB);

  auto reqs = requests_of_this_test();
  EXPECT_EQ(count(reqs, "POST /cp-test/" + prefix_ + "/checkpoints/model.bin?uploads"), 1);
  EXPECT_EQ(count(reqs, "partNumber="), 3);
  EXPECT_EQ(count(reqs, "POST /cp-test/" + prefix_ + "/checkpoints/model.bin?uploadId="), 1);
}

TEST_F(S3rverTest, AtTheThresholdIsOnePut) {
  // An object of exactly the threshold is a single PUT, no multipart upload.
  S3Options o = options();
  o.multipart_threshold = 1 * kMiB;
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  const std::string data = random_bytes(1 * kMiB, 8);
  ASSERT_TRUE(store->put("one", data).ok());
  EXPECT_EQ(store->get("one").value(), data);
  auto reqs = requests_of_this_test();
  EXPECT_EQ(count(reqs, "?uploads"), 0);
  EXPECT_EQ(count(reqs, "PUT /cp-test/" + prefix_ + "/one"), 1);
}

TEST_F(S3rverTest, SmallThresholdStillUsesFiveMiBParts) {
  // A threshold under S3's 5 MiB minimum part makes parts of 5 MiB (the last may be smaller).
  S3Options o = options();
  o.multipart_threshold = 1024;
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  const std::string data = random_bytes(6 * kMiB + 3, 9);
  ASSERT_TRUE(store->put("p", data).ok());
  EXPECT_EQ(store->get("p").value(), data);
  EXPECT_EQ(count(requests_of_this_test(), "partNumber="), 2);
}

TEST_F(S3rverTest, FailedPartAbortsTheUpload) {
  // When a part keeps failing, put fails as unavailable and the upload is aborted (DELETE ?uploadId=).
  S3Options o = options();
  o.multipart_threshold = 5 * kMiB;
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  server_->fail_next("PUT", prefix_ + "/big?partNumber=2", 500, 100);
  auto put = store->put("big", random_bytes(11 * kMiB, 10));
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, "unavailable");
  EXPECT_THAT(put.error().message, HasSubstr("UploadPart"));
  EXPECT_TRUE(put.error().details.contains("upload_id"));
  auto reqs = requests_of_this_test();
  EXPECT_EQ(count(reqs, "partNumber=2"), 3) << "part 2 is tried max_attempts times";
  EXPECT_EQ(count(reqs, "partNumber=3"), 0) << "no part after the failed one";
  EXPECT_EQ(count(reqs, "DELETE /cp-test/" + prefix_ + "/big?uploadId="), 1);
  EXPECT_EQ(store->get("big").value(), std::nullopt);
}

TEST_F(S3rverTest, ServerErrorsAreRetried) {
  // Two 503 SlowDown answers, then success: get and put retry and succeed within max_attempts.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  server_->fail_next("PUT", prefix_ + "/r", 503, 2);
  ASSERT_TRUE(store->put("r", "v").ok());
  server_->fail_next("GET", prefix_ + "/r", 500, 2);
  EXPECT_EQ(store->get("r").value(), "v");
  auto reqs = requests_of_this_test();
  EXPECT_EQ(count(reqs, "PUT "), 3);
  EXPECT_EQ(count(reqs, "GET "), 3);
}

TEST_F(S3rverTest, PersistentServerErrorIsUnavailable) {
  // A 500 on every attempt ends as unavailable (503, retryable), naming the operation and the S3 code.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  server_->fail_next("GET", prefix_ + "/x", 500, 3);
  auto got = store->get("x");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, "unavailable");
  EXPECT_EQ(got.error().status, 503);
  EXPECT_THAT(got.error().message, HasSubstr("GetObject"));
  EXPECT_THAT(got.error().message, HasSubstr("InternalError"));
  EXPECT_THAT(got.error().message, HasSubstr("3 attempts"));
}

TEST_F(S3rverTest, OddKeysRoundTripAndList) {
  // Keys with spaces, '+', '&', '%', '?', '#', quotes, '=' and UTF-8 are stored, read and listed exactly.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  std::vector<std::string> keys{"a b/c d",         "plus+sign",    "amp&ersand",       "100%/done",
                                "q?x=1#frag",      "it's \"q\" <t>", "semi;colon,comma", "训练/日志 1",
                                "tilde~/star*(1)", "ü/ß",          "a+b&c=d%20e"};
  for (const auto& k : keys) {
    auto p = store->put(k, "v:" + k);
    ASSERT_TRUE(p.ok()) << k << ": " << p.error().message;
  }
  for (const auto& k : keys) EXPECT_EQ(store->get(k).value(), "v:" + k) << k;
  auto listed = store->list("");
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  std::vector<std::string> got;
  for (const auto& info : *listed) got.push_back(info.key);
  std::sort(got.begin(), got.end());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(got, keys);
  // A prefix with the same characters selects them.
  auto plus = store->list("a+b&");
  ASSERT_TRUE(plus.ok());
  ASSERT_EQ(plus->size(), 1u);
  EXPECT_EQ((*plus)[0].key, "a+b&c=d%20e");
  for (const auto& k : keys) EXPECT_TRUE(store->remove(k).ok()) << k;
  EXPECT_TRUE(store->list("").value().empty());
}

TEST_F(S3rverTest, ListFollowsContinuationTokens) {
  // With 7 keys a page, 25 objects come back in one list() through four ListObjectsV2 calls.
  S3Options o = options();
  o.list_page_keys = 7;
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  std::vector<std::string> keys;
  for (int i = 0; i < 25; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "k/%02d", i);
    keys.push_back(key);
    ASSERT_TRUE(store->put(key, "x").ok());
  }
  auto all = store->list("k/");
  ASSERT_TRUE(all.ok()) << all.error().message;
  std::vector<std::string> got;
  for (const auto& info : *all) got.push_back(info.key);
  EXPECT_EQ(got, keys);
  auto reqs = requests_of_this_test();
  EXPECT_EQ(count(reqs, "list-type=2"), 4);
  EXPECT_EQ(count(reqs, "continuation-token="), 3);

  // start_after and limit across pages.
  auto some = store->list("k/", "k/05", 10);
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->size(), 10u);
  EXPECT_EQ(some->front().key, "k/06");
  EXPECT_EQ(some->back().key, "k/15");
}

TEST_F(S3rverTest, WrongSecretIsSignatureDoesNotMatch) {
  // A wrong secret key: 403 object_store_forbidden naming SignatureDoesNotMatch, not retried.
  S3Options o = options();
  o.credentials.secret_access_key = "not-the-secret";
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  auto got = store->get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, "object_store_forbidden");
  EXPECT_EQ(got.error().status, 403);
  EXPECT_THAT(got.error().message, HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(got.error().message, HasSubstr("AWS_SECRET_ACCESS_KEY"));
  EXPECT_EQ(got.error().details.at("s3_code").as_string(), "SignatureDoesNotMatch");
  EXPECT_FALSE(got.error().details.at("retryable").as_bool());
  EXPECT_FALSE(got.error().message_zh.empty());
  for (auto code : {store->put("k", "v").error().code, store->list("").error().code, store->remove("k").error().code}) {
    EXPECT_EQ(code, "object_store_forbidden");
  }
}

TEST_F(S3rverTest, WrongAccessKeyIsInvalidAccessKeyId) {
  // An unknown access key id is 403 InvalidAccessKeyId.
  S3Options o = options();
  o.credentials.access_key_id = "AKIDUNKNOWN";
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  auto put = store->put("k", "v");
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().status, 403);
  EXPECT_THAT(put.error().message, HasSubstr("InvalidAccessKeyId"));
}

TEST_F(S3rverTest, MissingBucketIsAnErrorNotAMissingKey) {
  // get from a bucket that does not exist is an error (NoSuchBucket), not nullopt.
  S3Options o = options();
  o.bucket = "no-such-bucket";
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  auto got = store->get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, "object_store_rejected");
  EXPECT_EQ(got.error().status, 404);
  EXPECT_THAT(got.error().message, HasSubstr("NoSuchBucket"));
  EXPECT_FALSE(store->remove("k").ok());
}

TEST_F(S3rverTest, SessionTokenIsSignedAndSent) {
  // With AWS_SESSION_TOKEN, x-amz-security-token goes with every request and is covered by the signature.
  S3Options o = options();
  o.credentials.session_token = "FwoGZXIvYXdzEXAMPLE//token+with/odd=chars";
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("t", "v").ok());
  EXPECT_EQ(store->get("t").value(), "v");
}

TEST_F(S3rverTest, VirtualHostStyleAgainstTheServer) {
  // style=virtual sends Host: cp-test.s3.localhost:<port> and /key; s3rver maps the host back to the bucket.
  S3Options o = options();
  o.endpoint = "http://s3.localhost:" + std::to_string(server_->port());
  o.style = S3AddressingStyle::kVirtual;
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  auto put = store->put("v/k", "virtual");
  ASSERT_TRUE(put.ok()) << put.error().message;
  EXPECT_EQ(store->get("v/k").value(), "virtual");
  auto listed = store->list("v/");
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  // The same object seen through path style.
  auto path_store = open(options());
  EXPECT_EQ(path_store->get("v/k").value(), "virtual");
}

TEST_F(S3rverTest, PrefixesIsolateStores) {
  // Two stores on one bucket with different prefixes see only their own keys.
  auto a = open(options());
  S3Options ob = options();
  ob.prefix = prefix_ + "z";
  auto b = open(ob);
  ASSERT_TRUE(a->put("k", "a").ok());
  ASSERT_TRUE(b->put("k", "b").ok());
  EXPECT_EQ(a->get("k").value(), "a");
  EXPECT_EQ(b->get("k").value(), "b");
  EXPECT_EQ(a->list("").value().size(), 1u);
  // A store on the whole bucket sees both under their prefixes.
  S3Options whole = options();
  whole.prefix = "";
  auto all = open(whole);
  auto listed = all->list(prefix_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, prefix_ + "/k");
  EXPECT_EQ((*listed)[1].key, prefix_ + "z/k");
}

TEST_F(S3rverTest, OpenObjectStoreFromUrlAndEnvironment) {
  // open_object_store("s3://...") reads the URL and AWS_* variables and gives a working store.
  ScopedEnv id("AWS_ACCESS_KEY_ID", kS3rverKey);
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", kS3rverSecret);
  ScopedEnv token("AWS_SESSION_TOKEN", nullptr);
  const std::string url = "s3://" + std::string(kS3rverBucket) + "/" + prefix_ + "?endpoint=" + server_->endpoint() +
                          "&region=us-east-1&style=path";
  auto s = open_object_store(url);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ((*s)->url(), url);
  ASSERT_TRUE((*s)->put("k", "v").ok());
  EXPECT_EQ((*s)->get("k").value(), "v");
}

TEST_F(S3rverTest, PutReportsServerTime) {
  // put's modified time is the server's clock (its Date header), close to what list reports.
  auto store = open(options());
  auto p = store->put("t", "x");
  ASSERT_TRUE(p.ok());
  auto l = store->list("t");
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_GT(p->modified_ms, 1'600'000'000'000);
  EXPECT_LE(std::abs((*l)[0].modified_ms - p->modified_ms), 2000);
  EXPECT_EQ(p->version_id, "");  // s3rver has no versioning
}

// A GET of `url` with no credential of its own, as an agent reads a read_url.
HttpResponse fetch(const std::string& url) {
  HttpClient http;
  HttpRequestOptions opts;
  opts.timeout_ms = 20000;
  auto r = http.request("GET", url, "", "", opts);
  EXPECT_TRUE(r.ok()) << url << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : HttpResponse{};
}

TEST_F(S3rverTest, ReadUrlReadsWithoutCredentials) {
  // A plain GET of the presigned URL, no Authorization header, reads the object byte for byte.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  const std::string data = random_bytes(64 * 1024, 11);
  ASSERT_TRUE(store->put("beacon/a b+c", data).ok());
  auto u = store->read_url("beacon/a b+c", 600);
  ASSERT_TRUE(u.ok()) << u.error().message;
  auto r = fetch(*u);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.body == data) << "the presigned GET read other bytes";
  // The front saw it as a presigned GET of the object (no header-signed GET).
  auto reqs = requests_of_this_test();
  EXPECT_EQ(count(reqs, "GET /cp-test/" + prefix_ + "/beacon/a%20b%2Bc?X-Amz-Algorithm=AWS4-HMAC-SHA256"), 1);
}

TEST_F(S3rverTest, ReadUrlWithAlteredSignatureOrKeyIsRefused) {
  // One hex digit of the signature changed, or the same query on another key: 403 SignatureDoesNotMatch.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("k1", "one").ok());
  ASSERT_TRUE(store->put("k2", "two").ok());
  std::string u = store->read_url("k1", 600).value();
  ASSERT_EQ(fetch(u).status, 200);
  std::string bad = u;
  bad.back() = bad.back() == '0' ? '1' : '0';
  auto r = fetch(bad);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(s3xml::text(r.body, "Code"), "SignatureDoesNotMatch");
  std::string other = u;
  other.replace(other.find("/k1?"), 4, "/k2?");
  r = fetch(other);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(s3xml::text(r.body, "Code"), "SignatureDoesNotMatch");
  // Without the signature it is no presigned URL S3 accepts.
  r = fetch(u.substr(0, u.find("&X-Amz-Signature=")));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(s3xml::text(r.body, "Code"), "AuthorizationQueryParametersError");
}

TEST_F(S3rverTest, ReadUrlOfMissingKeyIs404) {
  // A URL can be made for a key never written (no request is made); using it is S3's 404 NoSuchKey.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  auto u = store->read_url("never/written", 600);
  ASSERT_TRUE(u.ok()) << u.error().message;
  auto r = fetch(*u);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(s3xml::text(r.body, "Code"), "NoSuchKey");
}

TEST_F(S3rverTest, ReadUrlTtlIsClampedAndLongerIsRefused) {
  // A 30-day ask is signed for 7 days and works; a URL signed for 7 days and 1 s is refused as S3 refuses it.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("week", "w").ok());
  auto u = store->read_url("week", 30 * 86400);
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_THAT(*u, HasSubstr("&X-Amz-Expires=604800&"));
  EXPECT_EQ(fetch(*u).body, "w");
  const S3Target t = store->target(prefix_ + "/week");
  const std::string date = sigv4::amz_date(SystemClock::instance().now_ms());
  auto r = fetch(t.url + "?" +
                 sigv4::presign_query(options().credentials, "GET", t.canonical_uri, t.host, date, "us-east-1", "s3",
                                      kMaxReadUrlTtlS + 1));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(s3xml::text(r.body, "Code"), "AuthorizationQueryParametersError");
}

TEST_F(S3rverTest, ReadUrlExpires) {
  // Signed 8 days ago for 1 day: 403 "Request has expired". Signed 1 hour ago for 2 hours: still good (a presigned
  // URL counts from X-Amz-Date, with no 15-minute skew rule).
  const Millis now = SystemClock::instance().now_ms();
  SimulatedClock past(now - 8 * 86'400'000LL);
  S3Options o = options();
  o.clock = &past;
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(open(options())->put("old", "o").ok());
  auto r = fetch(store->read_url("old", 86400).value());
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(s3xml::text(r.body, "Code"), "AccessDenied");
  EXPECT_EQ(s3xml::text(r.body, "Message"), "Request has expired");
  past.set_ms(now - 3'600'000);
  r = fetch(store->read_url("old", 2 * 3600).value());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "o");
}

TEST_F(S3rverTest, ReadUrlWithSessionTokenAndVirtualHost) {
  // The session token travels signed in the URL; virtual-host style signs the bucket's host name.
  S3Options o = options();
  o.credentials.session_token = "FwoGZXIvYXdzEXAMPLE//token+with/odd=chars";
  auto store = open(o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->put("t", "token").ok());
  auto u = store->read_url("t", 60);
  ASSERT_TRUE(u.ok());
  EXPECT_THAT(*u, HasSubstr("&X-Amz-Security-Token=FwoGZXIvYXdzEXAMPLE%2F%2Ftoken%2Bwith%2Fodd%3Dchars&"));
  EXPECT_EQ(fetch(*u).body, "token");

  S3Options v = options();
  v.endpoint = "http://s3.localhost:" + std::to_string(server_->port());
  v.style = S3AddressingStyle::kVirtual;
  auto vstore = open(v);
  ASSERT_NE(vstore, nullptr);
  auto vu = vstore->read_url("t", 60);
  ASSERT_TRUE(vu.ok());
  EXPECT_THAT(*vu, ::testing::StartsWith("http://cp-test.s3.localhost:"));
  auto r = fetch(*vu);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "token");
}

TEST_F(S3rverTest, PresignedWritesAreRefused) {
  // The front takes presigned GET and HEAD only, what read_url makes: a presigned PUT is 403.
  auto store = open(options());
  ASSERT_NE(store, nullptr);
  const S3Target t = store->target(prefix_ + "/w");
  const std::string date = sigv4::amz_date(SystemClock::instance().now_ms());
  HttpClient http;
  auto r = http.request("PUT",
                        t.url + "?" +
                            sigv4::presign_query(options().credentials, "PUT", t.canonical_uri, t.host, date,
                                                 "us-east-1", "s3", 60),
                        "x", "application/octet-stream");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(s3xml::text(r->body, "Code"), "AccessDenied");
  EXPECT_EQ(store->get("w").value(), std::nullopt);
}

TEST(S3rverStopped, StoppedServerIsRetryableUnavailable) {
  // After the server goes away, calls fail as unavailable (503, retryable) after max_attempts tries.
  if (s3_tests_off()) GTEST_SKIP() << "S3 tests are off (CUBEPLANE_TEST_S3=off)";
  auto server = S3rverProcess::start();
  ASSERT_TRUE(server.ok()) << server.error().message;
  auto store = S3ObjectStore::open(s3rver_options(**server, "stopped"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->put("k", "v").ok());
  (*server)->stop();
  auto got = (*store)->get("k");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, "unavailable");
  EXPECT_EQ(got.error().status, 503);
  EXPECT_TRUE(got.error().details.at("retryable").as_bool());
  EXPECT_EQ(got.error().details.at("attempts").as_int64(), 3);
  EXPECT_THAT(got.error().message, HasSubstr("after 3 attempts"));
  EXPECT_FALSE(got.error().message_zh.empty());
  for (auto code : {(*store)->put("k", "v").error().code, (*store)->list("").error().code,
                    (*store)->remove("k").error().code}) {
    EXPECT_EQ(code, "unavailable");
  }
}

}  // namespace
}  // namespace cp
