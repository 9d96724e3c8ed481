// For tests of image import: tar archives (container image layers, written by libarchive,
// hostile ones included) and OCI image layouts made of them, as a directory or a tarball.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tests/support/file_text.h"
#include "vmm/image/oci_blob.h"

namespace dsec::test {

// A tar archive built entry by entry; bytes() writes it (pax), plain or compressed.
class TarBuilder {
 public:
  enum class Compression { kNone, kGzip, kZstd };
  static constexpr int64_t kMtime = 1'700'000'000;  // every entry's, unless said otherwise

  TarBuilder& file(std::string path, std::string content, mode_t mode = 0644,
                   int64_t mtime = kMtime) {
    Entry& e = add(std::move(path), AE_IFREG, mode);
    e.mtime = mtime;
    e.content = std::move(content);
    return *this;
  }
  TarBuilder& dir(std::string path, mode_t mode = 0755, int64_t mtime = kMtime) {
    add(std::move(path), AE_IFDIR, mode).mtime = mtime;
    return *this;
  }
  TarBuilder& symlink(std::string path, std::string target) {
    add(std::move(path), AE_IFLNK, 0777).link = std::move(target);
    return *this;
  }
  TarBuilder& hardlink(std::string path, std::string target) {
    Entry& e = add(std::move(path), AE_IFREG, 0644);
    e.link = std::move(target);
    e.hard = true;
    return *this;
  }
  TarBuilder& fifo(std::string path) {
    add(std::move(path), AE_IFIFO, 0600);
    return *this;
  }
  TarBuilder& char_device(std::string path) {
    add(std::move(path), AE_IFCHR, 0666);
    return *this;
  }
  TarBuilder& block_device(std::string path) {
    add(std::move(path), AE_IFBLK, 0660);
    return *this;
  }
  // `dir`/.wh.`name`: deletes `name` of the layers below.
  TarBuilder& whiteout(const std::string& dir, const std::string& name) {
    return file((dir.empty() ? "" : dir + "/") + ".wh." + name, "");
  }
  // `dir`/.wh..wh..opq: hides what the layers below put in `dir`.
  TarBuilder& opaque(const std::string& dir) { return file(dir + "/.wh..wh..opq", ""); }

  std::string bytes(Compression compression = Compression::kNone) const {
    std::string out;
    archive* a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    if (compression == Compression::kGzip) archive_write_add_filter_gzip(a);
    if (compression == Compression::kZstd) archive_write_add_filter_zstd(a);
    archive_write_set_bytes_in_last_block(a, 1);
    EXPECT_EQ(archive_write_open(a, &out, nullptr, append, nullptr), ARCHIVE_OK)
        << archive_error_string(a);
    for (const Entry& e : entries_) {
      archive_entry* entry = archive_entry_new();
      archive_entry_set_pathname(entry, e.path.c_str());
      archive_entry_set_filetype(entry, e.type);
      archive_entry_set_perm(entry, e.mode);
      archive_entry_set_mtime(entry, e.mtime, 0);
      archive_entry_set_uid(entry, 0);
      archive_entry_set_gid(entry, 0);
      if (e.hard) {
        archive_entry_set_hardlink(entry, e.link.c_str());
      } else if (e.type == AE_IFLNK) {
        archive_entry_set_symlink(entry, e.link.c_str());
      }
      archive_entry_set_size(entry, static_cast<la_int64_t>(e.content.size()));
      EXPECT_EQ(archive_write_header(a, entry), ARCHIVE_OK)
          << e.path << ": " << archive_error_string(a);
      if (!e.content.empty()) {
        archive_write_data(a, e.content.data(), e.content.size());
      }
      archive_entry_free(entry);
    }
    archive_write_close(a);
    archive_write_free(a);
    return out;
  }

 private:
  struct Entry {
    std::string path;
    mode_t type = AE_IFREG;
    mode_t mode = 0644;
    int64_t mtime = kMtime;
    std::string content;
    std::string link;
    bool hard = false;
  };
  Entry& add(std::string path, mode_t type, mode_t mode) {
    Entry& entry = entries_.emplace_back();
    entry.path = std::move(path);
    entry.type = type;
    entry.mode = mode;
    return entry;
  }
  static la_ssize_t append(archive*, void* client, const void* buffer, size_t length) {
    static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
    return static_cast<la_ssize_t>(length);
  }

  std::vector<Entry> entries_;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// An OCI image layout in a directory: blobs named by their sha256, manifests and configs
// written as JSON, an index of chosen manifests.
class OciLayoutBuilder {
 public:
  static constexpr const char* kLayerTar = "application/vnd.oci.image.layer.v1.tar";
  static constexpr const char* kLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip";

  explicit OciLayoutBuilder(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_ / "blobs/sha256");
    write_bytes(dir_ / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  }

  const std::filesystem::path& dir() const { return dir_; }

  // Stores `bytes` as a blob; its descriptor.
  nlohmann::json blob(const std::string& bytes, const std::string& media_type) {
    const std::string hex = image::oci::sha256_hex(
        std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    write_bytes(blob_path("sha256:" + hex), bytes);
    return {{"mediaType", media_type}, {"digest", "sha256:" + hex}, {"size", bytes.size()}};
  }

  std::filesystem::path blob_path(const std::string& digest) const {
    return dir_ / "blobs/sha256" / digest.substr(7);
  }

  // An image of `layers` (blob descriptors, bottom first) for linux/`architecture`: its
  // config and manifest stored; the manifest's descriptor, with `ref` as its ref name.
  nlohmann::json image(const std::vector<nlohmann::json>& layers,
                       const std::string& architecture = "amd64", const std::string& ref = "") {
    const nlohmann::json config = {{"architecture", architecture}, {"os", "linux"}};
    const nlohmann::json manifest = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
        {"config", blob(config.dump(), "application/vnd.oci.image.config.v1+json")},
        {"layers", layers}};
    nlohmann::json descriptor = blob(manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
    descriptor["platform"] = {{"os", "linux"}, {"architecture", architecture}};
    if (!ref.empty()) {
      descriptor["annotations"] = {{"org.opencontainers.image.ref.name", ref}};
    }
    return descriptor;
  }

  void index(const std::vector<nlohmann::json>& manifests) {
    write_bytes(dir_ / "index.json",
                nlohmann::json({{"schemaVersion", 2}, {"manifests", manifests}}).dump());
  }

  // The layout's files as a tar archive (as skopeo's oci-archive: writes it).
  std::string tarball() const {
    TarBuilder tar;
    tar.dir("blobs").dir("blobs/sha256");
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_)) {
      if (entry.is_regular_file()) {
        tar.file(std::filesystem::relative(entry.path(), dir_).string(), file_text(entry.path()));
      }
    }
    return tar.bytes();
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace dsec::test
