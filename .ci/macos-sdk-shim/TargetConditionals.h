/* Only for type-checking the macOS build on Linux (`.ci/run`): ring's C code asks Apple's SDK
   which Apple system it is built for. The objects made with it are never linked. */
#ifndef NEW_CI_TARGET_CONDITIONALS_H
#define NEW_CI_TARGET_CONDITIONALS_H
#define TARGET_OS_MAC 1
#define TARGET_OS_OSX 1
#define TARGET_OS_IPHONE 0
#endif
