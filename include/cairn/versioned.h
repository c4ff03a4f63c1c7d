/* cairn/versioned.h — automatic in-place versioning (seed 004 §4.1): mark the
 * arrays a simulation must not lose and its main loop; the compiler pass
 * (clang-16 with the cairn-versioning plugin, through `cairn-cc` or the CMake
 * function cairn_versioned()) does the rest.
 *
 *   #include <cairn/versioned.h>
 *   double* CAIRN_VERSIONED u = malloc(n * sizeof(double));   // a target array
 *   init(u);
 *   for (long it = 0; it < iterations; ++it) {
 *     CAIRN_MAIN_LOOP();                                        // this is the main loop
 *     update(u);                                                // unchanged code
 *   }
 *   use(u);                                                     // the final state
 *
 * What the pass makes of it: the array gets a second version in a cairn pool
 * (strategy in-place). Inside each iteration, reads of `u` before its first
 * update read the consistent version, reads after it and every write go to
 * the working version; at the end of the iteration the working version is
 * written back by the helper thread and committed with the loop counter, and
 * the roles switch. Outside the loop `u` is the ordinary array: the pool's
 * versions are filled from it when the loop is entered and copied back into
 * it when the loop exits. An array the pass cannot prove the rule for (its
 * updates are not the same elements every iteration, or a loop reads elements
 * it has already overwritten at other indices) is persisted by copy instead
 * (a plain region, copied with non-temporal stores at each commit). What the
 * pass refuses with an error naming the line and the array: a marked pointer
 * passed to a call inside the loop or stored in memory, an access it cannot
 * tell apart from the marked arrays, a value other than the loop counter
 * carried from one iteration to the next, a loop it cannot resume.
 *
 * Rules for the marked program:
 *   - the marked pointer is assigned once, from malloc, calloc, aligned_alloc
 *     or new[] (the pass reads the size there), in the function that holds
 *     the main loop (after inlining);
 *   - the main loop is a counted loop (`for (i = a; i < b; ++i)` with b not
 *     changed by the loop), and the marked arrays and its counter are the
 *     whole state carried from one iteration to the next (other memory the
 *     loop writes is scratch, fully rewritten before it is read);
 *   - compile with optimisation (-O1 or more): the pass runs after inlining.
 *
 * Running: the pool is <dir>/<name>.pool with <name> = $CAIRN_AUTO_NAME or
 * the program's name and <dir> = $CAIRN_POOL_DIR (else cairn's default pool
 * directory). A run starts afresh unless $CAIRN_RESUME=1: then it restores the
 * last committed iteration and continues after it (an error if there is none).
 */
#ifndef CAIRN_VERSIONED_H
#define CAIRN_VERSIONED_H

#ifdef __cplusplus
extern "C" {
#endif

#ifndef CAIRN_VERSIONING_OFF
/* On a pointer variable: the array it points to is a target of the versioning. */
#define CAIRN_VERSIONED __attribute__((annotate("cairn.versioned")))
/* The first statement of the main loop's body. */
#define CAIRN_MAIN_LOOP() cairn_main_loop_mark()
#else
/* -DCAIRN_VERSIONING_OFF: the same source, native (no pass, no persistence). */
#define CAIRN_VERSIONED
#define CAIRN_MAIN_LOOP() ((void)0)
#endif

/* Internal: the mark the pass looks for and removes. If it is ever called, the
 * program was not compiled with the pass, and it stops with a message. */
void cairn_main_loop_mark(void);

#ifdef __cplusplus
}
#endif

#endif /* CAIRN_VERSIONED_H */
