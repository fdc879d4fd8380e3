/* airetry: the command-line front end. Dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "airetry.h"
#include "cli.h"

static const char usage[] =
    "usage: airetry COMMAND [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  serve  --config FILE [--listen HOST:PORT] [--insecure]\n"
    "                         the OpenAI/Anthropic-compatible gateway\n"
    "  check  --config FILE   validate a config and print it resolved\n"
    "  chat   --config FILE --model NAME [--stream] [--system TEXT] PROMPT\n"
    "                         one call with retries and failover\n"
    "  mock   [--listen HOST:PORT] [--script FILE]\n"
    "                         the fault-injecting mock provider "
    "(docs/mock.md)\n"
    "  demo                   run the scripted failover demo (no keys, no "
    "network)\n"
    "\n"
    "  airetry --version | --help\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return AIR__EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    fputs(usage, stdout);
    return AIR__EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("airetry %s\n", AIR_VERSION);
    return AIR__EXIT_OK;
  }
  if (strcmp(cmd, "check") == 0) return air__cmd_check(argc - 1, argv + 1);
  if (strcmp(cmd, "demo") == 0) return air__cmd_demo(argc - 1, argv + 1);
  if (strcmp(cmd, "chat") == 0) return air__cmd_chat(argc - 1, argv + 1);
  if (strcmp(cmd, "mock") == 0) return air__cmd_mock(argc - 1, argv + 1);
  if (strcmp(cmd, "serve") == 0) return air__cmd_serve(argc - 1, argv + 1);
  fprintf(stderr, "airetry: unknown command '%s'\n\n%s", cmd, usage);
  return AIR__EXIT_USAGE;
}
