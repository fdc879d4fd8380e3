/* The airetry subcommands. Each returns the process exit code. */
#ifndef AIR__CLI_H
#define AIR__CLI_H

/* Exit codes shared by every subcommand. */
#define AIR__EXIT_OK 0
#define AIR__EXIT_FAIL 1  /* upstream failure after all attempts */
#define AIR__EXIT_USAGE 2 /* usage or config error */

int air__cmd_check(int argc, char **argv);
int air__cmd_demo(int argc, char **argv);
int air__cmd_chat(int argc, char **argv);
int air__cmd_mock(int argc, char **argv);
int air__cmd_serve(int argc, char **argv);

#endif
