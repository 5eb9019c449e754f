// The safetensors parser against well-formed files and one hostile file per
// rule of the spec (https://github.com/huggingface/safetensors#format).
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include "model/expect_error.h"
#include "model/st_writer.h"

namespace hayate {
namespace {

using test::raw_safetensors;
using test::safetensors_bytes;

SafetensorsFile parse(const std::vector<uint8_t>& bytes) {
  return parse_safetensors(bytes, "t.safetensors");
}

// Data bytes 0, 1, 2, ... n-1.
std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = uint8_t(i);
  return d;
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  const std::vector<uint8_t> bytes =
      safetensors_bytes({test::make_tensor("a", DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                         test::make_tensor("b", DType::BF16, {4}, {1, -1, 0.5f, 2}),
                         test::make_tensor("c", DType::F16, {1, 1, 2}, {3, 4}),
                         {"ids", "I64", {2}, std::vector<uint8_t>(16, 7)}},
                        {{"format", "pt"}});
  const SafetensorsFile f = parse(bytes);
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  const SafetensorsTensor* a = f.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a->data.size(), 24u);
  float x;
  std::memcpy(&x, a->data.data() + 20, 4);
  EXPECT_EQ(x, 6.0f);
  EXPECT_EQ(f.find("b")->dtype, DType::BF16);
  EXPECT_EQ(f.find("c")->dtype, DType::F16);
  // A known dtype hayate does not compute with is parsed; the loader rejects
  // it if a model weight uses it.
  EXPECT_FALSE(f.find("ids")->dtype.has_value());
  EXPECT_EQ(f.find("ids")->dtype_name, "I64");
  EXPECT_EQ(f.find("missing"), nullptr);
  // The spans point into the file's data section.
  EXPECT_EQ(f.find("ids")->data.data() + 16, bytes.data() + bytes.size());
}

TEST(Safetensors, AcceptsEmptyHeaderAndZeroSizedTensors) {
  EXPECT_TRUE(parse(raw_safetensors("{}")).tensors.empty());
  const SafetensorsFile f =
      parse(raw_safetensors(R"({"z":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]},)"
                            R"("s":{"dtype":"F16","shape":[],"data_offsets":[0,2]}})",
                            ramp(2)));
  EXPECT_EQ(f.find("z")->data.size(), 0u);
  EXPECT_EQ(f.find("s")->data.size(), 2u);  // a scalar: shape [] holds one element
}

TEST(Safetensors, RejectsFileShorterThanLengthField) {
  EXPECT_ERROR(parse({1, 2, 3}), "too short");
}

TEST(Safetensors, RejectsHeaderOverTheCap) {
  EXPECT_ERROR(parse(raw_safetensors("{}", {}, kMaxSafetensorsHeader + 1)), "100 MB");
}

TEST(Safetensors, RejectsHeaderPastEndOfFile) {
  EXPECT_ERROR(parse(raw_safetensors("{}", {}, 3)), "past the end");
  EXPECT_ERROR(parse(raw_safetensors("{}", {}, UINT64_MAX - 1)), "100 MB");
}

TEST(Safetensors, RejectsNonObjectHeader) {
  EXPECT_ERROR(parse(raw_safetensors("[1, 2]")), "JSON object");
  EXPECT_ERROR(parse(raw_safetensors("")), "JSON object");
}

TEST(Safetensors, RejectsMalformedJson) {
  EXPECT_ERROR(parse(raw_safetensors(R"({"a": )")), "not valid UTF-8 JSON");
  EXPECT_ERROR(parse(raw_safetensors(R"({} trailing)")), "not valid UTF-8 JSON");
}

TEST(Safetensors, RejectsInvalidUtf8InHeader) {
  std::string header = R"({"__metadata__":{"k":"v?"}})";
  header[header.find('?')] = '\xff';
  EXPECT_ERROR(parse(raw_safetensors(header)), "not valid UTF-8 JSON");
}

TEST(Safetensors, RejectsBadMetadata) {
  EXPECT_ERROR(parse(raw_safetensors(R"({"__metadata__":[1]})")), "__metadata__ must be");
  EXPECT_ERROR(parse(raw_safetensors(R"({"__metadata__":{"k":1}})")), "must be a string");
}

TEST(Safetensors, RejectsDuplicateTensorNames) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_ERROR(parse(raw_safetensors(header, ramp(8))), "duplicate key 'w'");
}

TEST(Safetensors, RejectsDuplicateKeysInsideAnEntry) {
  const std::string header =
      R"({"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_ERROR(parse(raw_safetensors(header, ramp(4))), "duplicate key 'dtype'");
}

TEST(Safetensors, RejectsEntryThatIsNotAnObject) {
  EXPECT_ERROR(parse(raw_safetensors(R"({"w":[1,2]})")), "entry must be an object");
}

TEST(Safetensors, RejectsUnknownOrMissingDtype) {
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})", ramp(4))),
      "unknown dtype 'F99'");
  EXPECT_ERROR(parse(raw_safetensors(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", ramp(4))),
               "missing string 'dtype'");
}

TEST(Safetensors, RejectsNegativeOrNonIntegerShape) {
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", ramp(4))),
      "shape entry must be a non-negative integer");
  EXPECT_ERROR(parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})",
                                     ramp(4))),
               "shape entry must be a non-negative integer");
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":4,"data_offsets":[0,4]}})", ramp(4))),
      "missing list 'shape'");
}

TEST(Safetensors, RejectsShapeWhoseByteSizeOverflows) {
  // 2^32 * 2^32 * 32 bits wraps a 64-bit size to 0, matching offsets [0, 0].
  EXPECT_ERROR(
      parse(raw_safetensors(
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})")),
      "shape overflows");
}

TEST(Safetensors, RejectsByteSizeNotMatchingShape) {
  EXPECT_ERROR(parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})",
                                     ramp(12))),
               "needs 16");
}

TEST(Safetensors, RejectsSubByteSizeThatIsNotWholeBytes) {
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", ramp(2))),
      "whole number of bytes");
}

TEST(Safetensors, RejectsMalformedOffsets) {
  EXPECT_ERROR(parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
                                     ramp(4))),
               "must be [begin, end]");
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", ramp(4))),
      "data_offsets end must be a non-negative integer");
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", ramp(4))),
      "end before begin");
}

TEST(Safetensors, RejectsOffsetsOutOfBounds) {
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", ramp(4))),
      "run past the 4-byte data section");
  // Offsets near 2^63 must not wrap around the bounds check.
  EXPECT_ERROR(
      parse(raw_safetensors(
          R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[9223372036854775800,9223372036854775804]}})",
          ramp(4))),
      "run past");
}

TEST(Safetensors, RejectsHoleBetweenTensors) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  EXPECT_ERROR(parse(raw_safetensors(header, ramp(12))), "leaves a hole");
}

TEST(Safetensors, RejectsHoleAtStartOfData) {
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", ramp(8))),
      "leaves a hole");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_ERROR(parse(raw_safetensors(header, ramp(8))), "overlaps");
  // The same region named twice is an overlap too (aliasing).
  const std::string alias = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_ERROR(parse(raw_safetensors(alias, ramp(4))), "overlaps");
}

TEST(Safetensors, RejectsUncoveredTrailingData) {
  EXPECT_ERROR(
      parse(raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", ramp(6))),
      "cover 4 of the 6 bytes");
}

TEST(Safetensors, RejectsDeepNesting) {
  std::string deep = R"({"__metadata__":)" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_ERROR(parse(raw_safetensors(deep)), "nested deeper");
}

TEST(Safetensors, DtypeBits) {
  EXPECT_EQ(safetensors_dtype_bits("BF16"), 16);
  EXPECT_EQ(safetensors_dtype_bits("F32"), 32);
  EXPECT_EQ(safetensors_dtype_bits("I64"), 64);
  EXPECT_EQ(safetensors_dtype_bits("F4"), 4);
  EXPECT_EQ(safetensors_dtype_bits("bf16"), 0);
}

TEST(StrictJson, RejectsDuplicateKeysAtAnyDepth) {
  EXPECT_ERROR(parse_json_strict(R"({"a":{"b":1,"b":2}})", "x.json"), "x.json: duplicate key 'b'");
  EXPECT_NO_THROW(parse_json_strict(R"({"a":{"b":1},"c":{"b":2}})", "x.json"));
}

}  // namespace
}  // namespace hayate
