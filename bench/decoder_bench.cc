// Throughput of the terminal decoder on mixed shell output (plain text, SGR colours, CR
// progress lines, UTF-8), fed in PTY-sized chunks: the line path (parser -> line model ->
// scrollback), the libvterm screen path, and the whole TerminalDecoder, in bytes per second.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <string_view>

#include "backend/terminal/line_model.h"
#include "backend/terminal/screen.h"
#include "backend/terminal/scrollback.h"
#include "backend/terminal/terminal_decoder.h"
#include "backend/terminal/vt_parser.h"

namespace ptybox::backend {
namespace {

constexpr size_t kChunk = 4096;  // one PTY read
constexpr size_t kCorpusBytes = 4 * 1024 * 1024;

enum class Mix { kMixed, kPlain, kSgr, kProgress, kUtf8 };

std::string Line(Mix kind, std::mt19937& rng, int i) {
  switch (kind) {
    case Mix::kPlain:
      return "2024-05-01T12:00:" + std::to_string(i % 60) + " INFO worker[" +
             std::to_string(rng() % 64) + "] processed request id=" + std::to_string(rng()) +
             " in 12ms status=200\r\n";
    case Mix::kSgr:
      return "\x1b[0m\x1b[01;34mdirectory" + std::to_string(i % 100) +
             "\x1b[0m  \x1b[01;32mscript.sh\x1b[0m  \x1b[00;31marchive.tar.gz\x1b[0m  "
             "README.md  \x1b[01;36mlink\x1b[0m\r\n";
    case Mix::kProgress: {
      std::string s;
      for (int p = 0; p <= 100; p += 10) {
        s += "\rDownloading layer " + std::to_string(i % 9) + ": [" + std::string(p / 5, '=') +
             ">" + std::string(20 - p / 5, ' ') + "] " + std::to_string(p) + "%\x1b[K";
      }
      return s + "\r\n";
    }
    case Mix::kUtf8:
      return "caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE"
             "\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88 \xF0\x9F\x98\x80 "
             "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 e\xCC\x81 line " +
             std::to_string(i) + "\r\n";
    case Mix::kMixed:
      break;
  }
  return {};
}

std::string Corpus(Mix mix) {
  std::mt19937 rng(1);
  std::string out;
  out.reserve(kCorpusBytes + 4096);
  for (int i = 0; out.size() < kCorpusBytes; ++i) {
    Mix kind = mix;
    if (mix == Mix::kMixed) {
      // Mostly plain log output, some colour, progress and non-ASCII text.
      const unsigned r = rng() % 10;
      kind = r < 5 ? Mix::kPlain : r < 7 ? Mix::kSgr : r < 8 ? Mix::kProgress : Mix::kUtf8;
    }
    out += Line(kind, rng, i);
  }
  return out;
}

const std::string& CorpusFor(Mix mix) {
  static const std::string corpora[] = {Corpus(Mix::kMixed), Corpus(Mix::kPlain), Corpus(Mix::kSgr),
                                        Corpus(Mix::kProgress), Corpus(Mix::kUtf8)};
  return corpora[static_cast<int>(mix)];
}

template <typename FeedFn>
void FeedChunks(const std::string& corpus, FeedFn&& feed) {
  for (size_t at = 0; at < corpus.size(); at += kChunk) {
    feed(std::string_view(corpus).substr(at, kChunk));
  }
}

// parser -> line model -> scrollback, as TerminalDecoder wires them, without the screen.
void BM_LinePath(benchmark::State& state) {
  const std::string& corpus = CorpusFor(static_cast<Mix>(state.range(0)));
  for (auto _ : state) {
    LineModel model(120, 64 * 1024);
    Scrollback scrollback(10000, 4 * 1024 * 1024);
    model.SetLineSink([&](std::string_view line) { scrollback.Append(line); });
    VtParser parser(model, 256 * 1024);
    FeedChunks(corpus, [&](std::string_view chunk) { parser.Feed(chunk); });
    benchmark::DoNotOptimize(scrollback.end());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(corpus.size()));
}

void BM_ScreenPath(benchmark::State& state) {
  const std::string& corpus = CorpusFor(static_cast<Mix>(state.range(0)));
  for (auto _ : state) {
    Screen screen(40, 120);
    FeedChunks(corpus, [&](std::string_view chunk) { screen.Feed(chunk); });
    benchmark::DoNotOptimize(screen.alternate_screen());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(corpus.size()));
}

void BM_TerminalDecoder(benchmark::State& state) {
  const std::string& corpus = CorpusFor(static_cast<Mix>(state.range(0)));
  for (auto _ : state) {
    TerminalDecoder decoder(TerminalDecoder::Options{});
    FeedChunks(corpus, [&](std::string_view chunk) { decoder.Feed(chunk); });
    benchmark::DoNotOptimize(decoder.scrollback().end());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(corpus.size()));
}

void Mixes(benchmark::internal::Benchmark* b) {
  b->ArgName("mix");
  for (Mix m : {Mix::kMixed, Mix::kPlain, Mix::kSgr, Mix::kProgress, Mix::kUtf8}) {
    b->Arg(static_cast<int>(m));
  }
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_LinePath)->Apply(Mixes);
BENCHMARK(BM_ScreenPath)->Apply(Mixes);
BENCHMARK(BM_TerminalDecoder)->Arg(static_cast<int>(Mix::kMixed))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ptybox::backend

BENCHMARK_MAIN();
