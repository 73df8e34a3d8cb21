#include "common/base64.h"

#include <gtest/gtest.h>

namespace ptybox {
namespace {

TEST(Base64Test, RoundTripsEveryLengthAndEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (size_t n = 0; n <= all.size(); ++n) {
    const std::string bytes = all.substr(all.size() - n);
    const std::string text = Base64Encode(bytes);
    EXPECT_EQ(text.size() % 4, 0u);
    EXPECT_EQ(Base64Decode(text), bytes) << n;
  }
}

TEST(Base64Test, MatchesRfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, RefusesWhatIsNotCanonical) {
  EXPECT_EQ(Base64Decode("Zg="), std::nullopt);       // length
  EXPECT_EQ(Base64Decode("Zg=a"), std::nullopt);      // padding inside
  EXPECT_EQ(Base64Decode("Z===Zm9v"), std::nullopt);  // padding before the end
  EXPECT_EQ(Base64Decode("Zm9\n"), std::nullopt);     // a foreign byte
}

}  // namespace
}  // namespace ptybox
