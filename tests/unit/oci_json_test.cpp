// The JSON documents of an OCI image layout (vmm/image/oci_json), and their malformed forms:
// what dsec-vmm reads is checked for its type and form, and each message names what is wrong.
#include "vmm/image/oci_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "vmm/image/oci_blob.h"

namespace dsec::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace oci = image::oci;

const std::string kDigest = "sha256:" + std::string(64, 'a');

std::string descriptor(const std::string& media_type, const std::string& digest = kDigest,
                       const std::string& extra = "") {
  return R"({"mediaType":")" + media_type + R"(","digest":")" + digest + R"(","size":12)" + extra +
         "}";
}

TEST(OciJson, Sha256OfKnownBytes) {
  const std::string abc = "abc";
  EXPECT_EQ(oci::sha256_hex(std::span(reinterpret_cast<const uint8_t*>(abc.data()), abc.size())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(OciJson, AnIndexListsItsManifestsWithPlatformsAndRefNames) {
  const std::string text =
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[)" +
      descriptor(std::string(oci::kOciManifest), kDigest,
                 R"(,"platform":{"os":"linux","architecture":"arm","variant":"v7"},)"
                 R"("annotations":{"org.opencontainers.image.ref.name":"app:1\u001b[2J"})") +
      "," +
      descriptor(std::string(oci::kOciManifest), "sha256:" + std::string(64, 'b'),
                 R"(,"annotations":{"org.opencontainers.image.ref.name":"2",)"
                 R"("io.containerd.image.name":"docker.io/library/app:2"})") +
      "]}";
  auto index = oci::parse_index(text, "index.json");
  ASSERT_TRUE(index) << index.error().message();
  ASSERT_EQ(index->size(), 2u);
  EXPECT_EQ((*index)[0].platform->text(), "linux/arm/v7");
  EXPECT_EQ((*index)[0].ref_name, "app:1?[2J");  // printed: no escape sequences
  EXPECT_EQ((*index)[0].size, 12u);
  EXPECT_FALSE((*index)[1].platform);
  EXPECT_EQ((*index)[1].ref_name, "docker.io/library/app:2");
  EXPECT_EQ((*index)[1].short_digest(), "sha256:bbbbbbbbbbbb");
}

TEST(OciJson, DigestsMustBeSha256InTheirCanonicalForm) {
  EXPECT_TRUE(oci::check_digest(kDigest, "d"));
  const auto sha512 = oci::check_digest("sha512:" + std::string(128, 'a'), "the digest");
  ASSERT_FALSE(sha512);
  EXPECT_THAT(sha512.error().message(), HasSubstr("uses the sha512 algorithm"));
  for (const std::string& bad :
       {"sha256:" + std::string(63, 'a'), "sha256:" + std::string(64, 'A'),
        "sha256:../../../../etc/passwd" + std::string(40, 'a'), std::string("abc")}) {
    const auto checked = oci::check_digest(bad, "the digest");
    ASSERT_FALSE(checked) << bad;
    EXPECT_THAT(checked.error().message(), HasSubstr("is not a"));
  }
}

TEST(OciJson, MalformedDocumentsAreRefusedWithWhatIsWrong) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"", "is empty"},
      {"{not json", "is not valid JSON"},
      {"[]", "must be a JSON object"},
      {R"({"manifests":[]})", "'schemaVersion' is missing"},
      {R"({"schemaVersion":1,"manifests":[]})", "schemaVersion 1"},
      {R"({"schemaVersion":2})", "'manifests' is missing"},
      {R"({"schemaVersion":2,"manifests":[{"digest":")" + kDigest + R"(","size":1}]})",
       "'mediaType' is missing in manifest 1 of index.json"},
      {R"({"schemaVersion":2,"manifests":[)" + descriptor("x", "sha256:short") + "]}",
       "is not a sha256 digest"},
      {R"({"schemaVersion":2,"manifests":[{"mediaType":"x","digest":")" + kDigest +
           R"(","size":-1}]})",
       "'size' in manifest 1 of index.json must be a non-negative integer"},
      {R"({"schemaVersion":2,"mediaType":")" + std::string(oci::kOciManifest) +
           R"(","manifests":[]})",
       "not the kind of document expected"},
  };
  for (const Case& c : cases) {
    const auto index = oci::parse_index(c.text, "index.json");
    ASSERT_FALSE(index) << c.text;
    EXPECT_THAT(index.error().message(), HasSubstr(c.expected)) << c.text;
  }
}

TEST(OciJson, AManifestNamesItsConfigAndLayersOfKindsItCanUnpack) {
  const std::string config = descriptor(std::string(oci::kOciConfig));
  const std::string layers = "[" + descriptor("application/vnd.oci.image.layer.v1.tar") + "," +
                             descriptor("application/vnd.docker.image.rootfs.diff.tar.gzip") + "," +
                             descriptor("application/vnd.oci.image.layer.v1.tar+zstd") + "]";
  auto manifest = oci::parse_manifest(
      R"({"schemaVersion":2,"config":)" + config + R"(,"layers":)" + layers + "}", "the manifest");
  ASSERT_TRUE(manifest) << manifest.error().message();
  EXPECT_EQ(manifest->layers.size(), 3u);

  auto encrypted = oci::parse_manifest(
      R"({"schemaVersion":2,"config":)" + config + R"(,"layers":[)" +
          descriptor("application/vnd.oci.image.layer.v1.tar+gzip+encrypted") + "]}",
      "the manifest");
  ASSERT_FALSE(encrypted);
  EXPECT_THAT(encrypted.error().message(),
              AllOf(HasSubstr("layer 1 of the manifest"), HasSubstr("+encrypted"),
                    HasSubstr("dsec-vmm unpacks tar layers")));

  auto artifact = oci::parse_manifest(R"({"schemaVersion":2,"config":)" +
                                          descriptor("application/vnd.cncf.helm.config.v1+json") +
                                          R"(,"layers":[]})",
                                      "the manifest");
  ASSERT_FALSE(artifact);
  EXPECT_THAT(artifact.error().message(), HasSubstr("not a container image"));
}

TEST(OciJson, AConfigSaysItsPlatform) {
  auto platform =
      oci::parse_config_platform(R"({"architecture":"amd64","os":"linux","config":{}})", "c");
  ASSERT_TRUE(platform);
  EXPECT_TRUE(platform->is_linux_amd64());
  auto missing = oci::parse_config_platform(R"({"os":"linux"})", "the config");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr("'architecture' is missing in the config"));
}

TEST(OciJson, TheLayoutFileMustSayVersionOne) {
  EXPECT_TRUE(oci::check_layout_file(R"({"imageLayoutVersion":"1.0.0"})"));
  const auto two = oci::check_layout_file(R"({"imageLayoutVersion":"2.0.0"})");
  ASSERT_FALSE(two);
  EXPECT_THAT(two.error().message(), HasSubstr("imageLayoutVersion 2.0.0"));
}

}  // namespace
}  // namespace dsec::test
