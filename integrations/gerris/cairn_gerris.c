/* cairn_gerris.c — a Gerris module: the CairnPersist event persists a whole simulation every step into cairn. */
/*
 * A .gfs file loads the module and adds one event (placed first among the
 * events, right after Time, so that at a persist no other event of that step
 * has run yet; see "Where in the step" below):
 *
 *   GModule cairn                      (installed; or the path of libcairn2D.so / libcairn3D.so)
 *   1 0 GfsSimulation GfsBox GfsGEdge {} {
 *     Time { end = 5 }
 *     CairnPersist { istep = 1 } { dir = /dev/shm/cairn name = shear mode = octree }
 *     ...
 *
 * mode = stream: each persist writes a small binary header (below) and then
 *   Gerris's own gfs_simulation_write (binary, every variable, every level)
 *   into the cairn stream pmem:DIR/NAME.pool#sim; closing the FILE* commits
 *   it with one 8-byte word. Restart reads it back with gfs_simulation_read
 *   from the same stream: no file is opened.
 * mode = octree: the cells live in a cairn PM-octree (DIR/NAME.octree): each
 *   persist takes a snapshot of Gerris's tree, refines and coarsens the
 *   PM-octree to match it, stores every leaf's whole state (all variables,
 *   the face temporaries, and the solid fractions in a case with a solid) as
 *   its payload, but only where it changed (the update callback returns 0
 *   otherwise: seed 000's delta persistence), then persists it. The header,
 *   the cells that have children and the boundaries' ghost cells go into
 *   pmem:DIR/NAME.pool#hdr0 or #hdr1 (version parity, below).
 *
 * Restart: the same .gfs run with CAIRN_GERRIS_RESUME=1 in the environment
 * (or `resume = 1` in the event's options). Gerris builds the simulation from
 * the .gfs as usual; the first time CairnPersist fires (step 0, before any
 * time step) it replaces the tree, every cell's values, the time, the time
 * step and the state of every event with the persisted ones, and the loop
 * continues from the persisted step. Rebuilding inside the running simulation
 * (instead of running a simulation read from a snapshot, as Gerris's own
 * restart does) is what makes the restart bit-identical: Gerris's restart
 * re-runs refinement and adaptation, re-derives event phases and reads the
 * time as text, so it ends on another mesh (measured: 1030 instead of 1003
 * cells after 20 steps of the shear case with a binary snapshot).
 *
 * Where in the step: Gerris runs every event at the start of a time step, in
 * the order of the file. CairnPersist records the state of every event as it
 * is at that moment: those before it have already fired for this step, those
 * after it not yet; restored, they continue exactly there. Events created or
 * destroyed by Gerris after step 0 are matched by their position in the list
 * at step 0 (a destroyed one is destroyed again on restore).
 *
 * Order of durability, octree mode: the header of version v+1 is committed to
 * slot (v+1) % 2 first, then the PM-octree is persisted as v+1. A crash in
 * between leaves the PM-octree at v, whose header is still intact in slot
 * v % 2 (the header records the version it belongs to and restore checks it).
 *
 * Asynchronous persists (octree mode, `async = 1`, the default): Gerris's
 * thread only copies the tree (its shape, every leaf's payload, the interior
 * and ghost cells) and the header into memory kept between persists; a
 * thread of the module then makes the PM-octree's working version follow
 * that snapshot, commits the header and persists the PM-octree while Gerris
 * computes the next step, and the next persist first waits for it (so does
 * the end of the run). A step's
 * persist is therefore durable during the next step: a crash before that
 * resumes one step earlier, never from a mix (the order above holds in the
 * writing thread). `async = 0` makes every persist durable before Gerris
 * goes on. Gerris's data is never touched by the writing thread.
 *
 * Refused with a message (never a silently different simulation): a pool of
 * another case (a hash of the simulation as written at step 0, modules
 * aside), of another dimension, with another variable list or cell layout,
 * or written for another domain (the box graph, in the header) or another
 * process count. Several boxes and parallel runs: see "the boxes" and
 * "parallel runs" below.
 *
 * Testing hooks: CAIRN_GERRIS_KILL_AT=N raises SIGKILL at step N just before
 * that step's persist, once the persist before it is durable;
 * CAIRN_GERRIS_KILL_IN_PERSIST=N raises it inside the writing of step N's
 * persist, after its header's commit and before the PM-octree's (the driver
 * of the CI cases uses both). CAIRN_GERRIS_STATS=1 prints persists, bytes
 * and seconds to stderr when the simulation ends.
 */
#include <gfs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cairn/cairn.h"
#ifdef CAIRN_GERRIS_DIST
#include "cairn_gerris_dist.h"
#endif

#define CP_MAGIC "CAIRNGFS"
#define CP_FORMAT 3u
#define CP_MODE_STREAM 0u
#define CP_MODE_OCTREE 1u
/* Doubles of a GfsSolidVector without its `merged` pointer: s[], a, fv, cm, ca, v. */
#define CP_SOLID_DOUBLES (FTT_NEIGHBORS + 2 + 3 * 3)
#define CP_LEAF_DESTROYED 1u
#define CP_LEAF_MIXED 2u

/* ---- the event object ---- */

/* One cell of the snapshot of Gerris's tree that a persist hands to the
 * writing: its children are FTT_CELLS consecutive nodes in Gerris's order. */
typedef struct {
  gint32 first; /* index of the first child; -1: a leaf or a destroyed cell */
  guint32 leaf; /* a leaf's payload: the index in Staged.leaves */
} SnapNode;

/* What a persist hands from Gerris's thread to the writing (octree mode):
 * a snapshot of the tree with every leaf's payload, the header stream's
 * bytes and the PM-octree version they belong to. The arrays are
 * CairnPersist's, kept between persists. */
typedef struct {
  cairn_octree* tree;
  guint payload_size;
  const SnapNode* nodes;
  const char* leaves;
  gchar* uri;   /* the header slot, pmem:DIR/NAME.pool#hdr<next % 2> */
  char* header; /* write_header and the count of extra cells, in DRAM */
  size_t header_bytes;
  const char* cells; /* the extra cells' payloads: CairnPersist's buffer, kept between persists */
  size_t cells_bytes;
  guint64 next;             /* the PM-octree version being made */
  gchar* error;             /* set by persist_write on failure */
  guint64 written;          /* set by persist_write: the leaves that changed */
  double follow_s, write_s; /* and its two parts' seconds */
  guint64 step;             /* the Gerris step persisted (the testing hook) */
  int rank;                 /* this process (the testing hook) */
  gboolean armed;           /* the testing hook applies: not a resumed run */
} Staged;

/* A growable array kept between persists (it stays mapped: no page faults
 * after the first persists). */
typedef struct {
  char* data;
  size_t capacity;
} Buffer;

typedef struct {
  GfsEvent parent;
  gchar* dir;
  gchar* name;
  guint mode;
  gint resume_option;

  gboolean started;    /* the first call (setup or restore) happened */
  GPtrArray* boxes;    /* this process's boxes, by id (sorted_boxes) */
  guint forest_levels; /* routing levels above the boxes in the PM-octree (the boxes) */
  gchar* graph;        /* box_graph: the domain, recorded in the header */
  int rank, ranks;     /* this process and the processes of the run (0 and 1 when serial) */
  /* Parallel runs (see "Parallel runs"): two lanes of pools, each its own
   * PM-octree and header slots, the step of agreed version V in lane V % 2. */
  gboolean parallel;
  gchar* base_name;           /* the event's name; a lane's pools are NAME.a / NAME.b */
  cairn_octree* lane_tree[2]; /* p->tree is lane_tree[p->lane] */
  guint lane;
  gboolean pending; /* a persist staged and not yet agreed on */
  guint64 pending_step, pending_version;
  GPtrArray* events;   /* the simulation's events at the first call: their identity by position */
  guint64 signature;   /* hash of the case at step 0 */
  cairn_octree* tree;  /* octree mode */
  guint state_doubles; /* doubles of a cell's state vector (faces + variables) */
  guint solid_doubles; /* CP_SOLID_DOUBLES, or 0 in a case without a solid (no cell can be cut) */
  guint payload_size;  /* bytes of a cell's payload */

  gint async;      /* octree mode, 1 (default): the durable part of a persist runs beside the next step */
  GThread* writer; /* that part, running */
  Staged staged;
  Buffer nodes, leaves, cells; /* the staged snapshot, leaf payloads and extra cells (octree mode) */

  guint64 persists, bytes, cells_written;
  double seconds;                    /* Gerris's time in the persists */
  double gather_s, header_s, wait_s; /* octree mode: Gerris's parts (and the writing when synchronous) */
  double follow_s, write_s;          /* octree mode: the writing's parts */
} CairnPersist;

static GfsEventClass* cairn_persist_class(void);
#define CAIRN_PERSIST(obj) GTS_OBJECT_CAST(obj, CairnPersist, cairn_persist_class())

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Gerris-side fatal error: the message, then exit (a restart must never go on
 * with a state it could not rebuild exactly). */
static void cp_fail(const CairnPersist* p, const char* fmt, ...) G_GNUC_PRINTF(2, 3);
static void cp_fail(const CairnPersist* p, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gchar* msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "CairnPersist (%s/%s): %s\n", p->dir, p->name, msg);
  g_free(msg);
#ifdef CAIRN_GERRIS_DIST
  /* in a parallel run, the whole job: the other processes may wait in a collective */
  if (p->parallel) {
    fflush(stderr);
    cp_dist_abort(1);
  }
#endif
  exit(1);
}

static gchar* stream_uri(const CairnPersist* p, const char* what) {
  return g_strdup_printf("pmem:%s/%s.pool#%s", p->dir, p->name, what);
}

static gchar* octree_path(const CairnPersist* p) { return g_strdup_printf("%s/%s.octree", p->dir, p->name); }

/* ---- the boxes ---- */

/* A simulation's boxes are persisted as one forest: a single PM-octree whose
 * top `forest_levels` levels only route to the boxes (box slot k, the k-th box
 * by id, lies at the octant whose child indices from the root are k's digits
 * in base FTT_CELLS; the slots past the last box are empty leaves), so that
 * one PM-octree version, committed once, holds every box of a step: with one
 * PM-octree per box a crash between two of their commits would leave boxes of
 * different steps, and no single version to go back to. One box: no routing
 * level, the box's root is the PM-octree's root. */

static gint add_box(gpointer box, gpointer data) {
  g_ptr_array_add(data, box);
  return 0;
}

static gint box_order(gconstpointer a, gconstpointer b) {
  const GfsBox* x = *(GfsBox* const*)a;
  const GfsBox* y = *(GfsBox* const*)b;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The boxes of a simulation (those of this process in a parallel run), by id:
 * Gerris keeps them in a hash container, whose order is not the same in every
 * run. */
static GPtrArray* sorted_boxes(GfsSimulation* sim) {
  GPtrArray* boxes = g_ptr_array_new();
  gts_container_foreach(GTS_CONTAINER(sim), add_box, boxes);
  g_ptr_array_sort(boxes, box_order);
  return boxes;
}

static GfsBox* box_at(const CairnPersist* p, guint k) { return g_ptr_array_index(p->boxes, k); }

/* The domain as a text that any change of the box graph changes: every box
 * (id, the process it runs on) with, in each direction, the box it touches
 * or the kind of boundary it has there, and the number of processes. */
static gchar* box_graph(GPtrArray* boxes, int ranks) {
  GString* s = g_string_new("");
  g_string_append_printf(s, "ranks %d;", ranks);
  for (guint k = 0; k < boxes->len; k++) {
    GfsBox* b = g_ptr_array_index(boxes, k);
    g_string_append_printf(s, " box %u pid %d [", b->id, b->pid);
    for (int d = 0; d < FTT_NEIGHBORS; d++) {
      GtsObject* n = b->neighbor[d];
      if (n == NULL)
        g_string_append(s, d ? " -" : "-");
      else if (GFS_IS_BOX(n))
        g_string_append_printf(s, d ? " %u" : "%u", GFS_BOX(n)->id);
      else
        g_string_append_printf(s, d ? " %s" : "%s", n->klass->info.name);
    }
    g_string_append(s, "]");
  }
  return g_string_free(s, FALSE);
}
/* ---- the header: case identity, variables, time, event states ---- */

typedef struct {
  gdouble t, start, end, step;
  guint32 index, i, istart, iend, istep, n, end_event, realised, redo, adapt_active;
} EventState;

typedef struct {
  char magic[8];
  guint32 format, dims, mode, state_doubles, solid_doubles, nboxes;
  guint64 signature, octree_version;
  GfsTime time;
  gdouble dt, tnext;
  GfsAdaptStats adapts_stats;
  guint32 rank, ranks; /* the process that wrote it and the processes of its run */
  guint32 nvars, nevents;
} Header;

static guint64 fnv1a(guint64 h, const void* data, size_t n) {
  const unsigned char* c = data;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

/* The case: the simulation as Gerris writes it at step 0, without cells and
 * without GModule lines (the module's path may differ between runs). */
static guint64 case_signature(GfsSimulation* sim) {
  char* text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  gfs_simulation_write(sim, -2, f);
  fclose(f);
  guint64 h = 1469598103934665603ull;
  gchar** lines = g_strsplit(text, "\n", -1);
  for (gchar** l = lines; *l; l++)
    if (!strstr(*l, "GModule ")) h = fnv1a(h, *l, strlen(*l) + 1);
  g_strfreev(lines);
  free(text);
  return h;
}

static gchar* variable_names(GfsDomain* domain) {
  GString* s = g_string_new("");
  for (GSList* i = domain->variables; i; i = i->next) {
    GfsVariable* v = i->data;
    g_string_append_printf(s, "%s%s", s->len ? "," : "", v->name ? v->name : "(temporary)");
  }
  return g_string_free(s, FALSE);
}

static int event_index(CairnPersist* p, gpointer e) {
  for (guint k = 0; k < p->events->len; k++)
    if (g_ptr_array_index(p->events, k) == e) return (int)k;
  return -1;
}

static void write_header(CairnPersist* p, GfsSimulation* sim, FILE* f, guint64 octree_version) {
  GfsDomain* domain = GFS_DOMAIN(sim);
  Header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CP_MAGIC, 8);
  h.format = CP_FORMAT;
  h.dims = FTT_DIMENSION;
  h.mode = p->mode;
  h.state_doubles = p->state_doubles;
  h.solid_doubles = p->solid_doubles;
  h.nboxes = p->boxes->len;
  h.rank = (guint32)p->rank;
  h.ranks = (guint32)p->ranks;
  h.signature = p->signature;
  h.octree_version = octree_version;
  h.time = sim->time;
  h.dt = sim->advection_params.dt;
  h.tnext = sim->tnext;
  h.adapts_stats = sim->adapts_stats;
  h.nvars = g_slist_length(domain->variables);
  h.nevents = g_slist_length(sim->events->items);
  fwrite(&h, sizeof h, 1, f);
  gchar* names = variable_names(domain);
  guint32 len = strlen(names);
  fwrite(&len, sizeof len, 1, f);
  fwrite(names, 1, len, f);
  g_free(names);
  len = strlen(p->graph);
  fwrite(&len, sizeof len, 1, f);
  fwrite(p->graph, 1, len, f);
  for (GSList* i = sim->events->items; i; i = i->next) {
    GfsEvent* e = i->data;
    int index = event_index(p, e);
    if (index < 0)
      cp_fail(p, "event %s was created after step 0: cannot persist its state", GTS_OBJECT(e)->klass->info.name);
    EventState s = {
        e->t,    e->start, e->end, e->step,      (guint32)index, e->i,    e->istart,
        e->iend, e->istep, e->n,   e->end_event, e->realised,    e->redo, GFS_IS_ADAPT(e) ? GFS_ADAPT(e)->active : 0};
    fwrite(&s, sizeof s, 1, f);
  }
}

/* Reads n items of `size` bytes into a buffer it allocates (one byte more, so
 * never empty), growing it as the data arrives: a count damaged to a huge
 * value ends as a short read, never as one huge allocation. NULL if the stream
 * holds fewer than n items. */
static char* read_items(FILE* f, size_t size, guint64 n) {
  if (size != 0 && n > (SIZE_MAX - 1) / size) return NULL;
  const size_t total = (size_t)n * size, chunk = 1u << 20;
  size_t got = 0;
  char* buf = g_malloc(MIN(total, chunk) + 1);
  while (got < total) {
    const size_t want = MIN(total - got, chunk);
    if (got > 0) buf = g_realloc(buf, got + want + 1);
    if (fread(buf + got, 1, want, f) != want) {
      g_free(buf);
      return NULL;
    }
    got += want;
  }
  return buf;
}

/* Reads and checks a header; returns the event states (nevents of them).
 * Every length it reads is bounded before it is used: a damaged or hostile
 * header ends the run with a message, never with a crash. */
static EventState* read_header(CairnPersist* p, GfsSimulation* sim, FILE* f, Header* h) {
  if (fread(h, sizeof *h, 1, f) != 1 || memcmp(h->magic, CP_MAGIC, 8) != 0)
    cp_fail(p, "the persisted state is not a CairnPersist header (another program's pool?)");
  if (h->format != CP_FORMAT)
    cp_fail(p,
            "persisted with format %u, this module reads %u: resume with the module that wrote it, or remove "
            "%s/%s.* to start afresh",
            h->format, CP_FORMAT, p->dir, p->name);
  if (h->dims != FTT_DIMENSION)
    cp_fail(p, "the pool holds a %uD simulation; this is gerris%dD", h->dims, FTT_DIMENSION);
  if (h->mode != p->mode)
    cp_fail(p, "the pool was written in mode %s, the event asks for mode %s", h->mode ? "octree" : "stream",
            p->mode ? "octree" : "stream");
  guint32 len = 0;
  if (fread(&len, sizeof len, 1, f) != 1 || len > (1u << 20))
    cp_fail(p, "truncated or damaged header (variable names); remove %s/%s.* to start afresh", p->dir, p->name);
  gchar* names = g_malloc0(len + 1);
  if (fread(names, 1, len, f) != len)
    cp_fail(p, "truncated header (variable names); remove %s/%s.* to start afresh", p->dir, p->name);
  if (fread(&len, sizeof len, 1, f) != 1 || len > (1u << 24))
    cp_fail(p, "truncated or damaged header (box graph); remove %s/%s.* to start afresh", p->dir, p->name);
  gchar* graph = g_malloc0(len + 1);
  if (fread(graph, 1, len, f) != len)
    cp_fail(p, "truncated header (box graph); remove %s/%s.* to start afresh", p->dir, p->name);
  if (h->ranks != (guint32)p->ranks)
    cp_fail(p,
            "the pool was written by a run on %u process%s, this one runs on %d: resume on %u, or remove "
            "%s/%s.* to start afresh",
            h->ranks, h->ranks == 1 ? "" : "es", p->ranks, h->ranks, p->dir, p->name);
  if (h->rank != (guint32)p->rank)
    cp_fail(p, "the pool was written by process %u, this is process %d", h->rank, p->rank);
  if (strcmp(graph, p->graph) != 0)
    cp_fail(p,
            "the pool was written for another domain or decomposition: %u box%s (%s); this simulation has %u "
            "(%s); remove %s/%s.* to start afresh",
            h->nboxes, h->nboxes == 1 ? "" : "es", graph, p->boxes->len, p->graph, p->dir, p->name);
  g_free(graph);
  gchar* ours = variable_names(GFS_DOMAIN(sim));
  if (strcmp(names, ours) != 0 || h->nvars != g_slist_length(GFS_DOMAIN(sim)->variables) ||
      h->state_doubles != p->state_doubles || h->solid_doubles != p->solid_doubles)
    cp_fail(p,
            "the variable list changed: the pool has %s (%u doubles per cell, %u of a solid), this simulation %s "
            "(%u, %u)",
            names, h->state_doubles, h->solid_doubles, ours, p->state_doubles, p->solid_doubles);
  g_free(names);
  g_free(ours);
  if (h->signature != p->signature)
    cp_fail(p,
            "the pool was written by another case (its .gfs differs from this one: signature %016llx, this "
            "case %016llx); remove %s/%s.* to start afresh",
            (unsigned long long)h->signature, (unsigned long long)p->signature, p->dir, p->name);
  /* The case wrote one state per event it had at step 0 (write_header
   * refuses later ones), so a header of this case holds at most that many. */
  if (h->nevents > p->events->len)
    cp_fail(p,
            "damaged header: it holds %u event states, this case has %u events; remove %s/%s.* to start "
            "afresh",
            h->nevents, p->events->len, p->dir, p->name);
  EventState* s = g_new0(EventState, (gsize)h->nevents + 1);
  if (fread(s, sizeof *s, h->nevents, f) != h->nevents)
    cp_fail(p, "truncated header (event states); remove %s/%s.* to start afresh", p->dir, p->name);
  return s;
}

/* Sets time, time step and every event's state; ends the events that had
 * ended (Gerris destroyed them) by the persisted step. */
static void apply_header(CairnPersist* p, GfsSimulation* sim, const Header* h, const EventState* s) {
  gboolean* alive = g_new0(gboolean, p->events->len);
  for (guint k = 0; k < h->nevents; k++) {
    if (s[k].index >= p->events->len) cp_fail(p, "event %u of the pool does not exist in this case", s[k].index);
    alive[s[k].index] = TRUE;
    GfsEvent* e = g_ptr_array_index(p->events, s[k].index);
    e->t = s[k].t;
    e->start = s[k].start;
    e->end = s[k].end;
    e->step = s[k].step;
    e->i = s[k].i;
    e->istart = s[k].istart;
    e->iend = s[k].iend;
    e->istep = s[k].istep;
    e->n = s[k].n;
    e->end_event = s[k].end_event;
    e->realised = s[k].realised;
    e->redo = s[k].redo;
    if (GFS_IS_ADAPT(e)) GFS_ADAPT(e)->active = s[k].adapt_active;
  }
  /* An event gone by the persisted step is not destroyed here (this runs
   * inside Gerris's loop over the events, which must not lose the element it
   * goes to next): made past its end, it destroys itself when next called,
   * as Gerris's own events do. */
  for (guint k = 0; k < p->events->len; k++)
    if (!alive[k]) {
      GfsEvent* e = g_ptr_array_index(p->events, k);
      if (g_slist_find(sim->events->items, e)) {
        e->redo = FALSE; /* an init event re-done by the start-up adaptation would fire once more */
        e->i = e->iend = 0;
      }
    }
  g_free(alive);
  sim->time = h->time;
  sim->advection_params.dt = h->dt;
  sim->tnext = h->tnext;
  sim->adapts_stats = h->adapts_stats;
}

/* Gerris's VOF advection alternates the order of its directional sweeps
 * with a counter of its own (a function-static in vof.c, advanced once per
 * call: once per VOF tracer and time step), not with the simulation's step,
 * so a restarted process would start it at 0 and sweep in another order than
 * the uninterrupted run from then on. Bring it where that run has it at the
 * restored step by advecting over an empty domain: nothing moves, only the
 * counter advances. */
static void align_vof_sweeps(GfsSimulation* sim) {
  GfsVariableTracerVOF* vof = NULL;
  guint n = 0;
  for (GSList* i = GFS_DOMAIN(sim)->variables; i; i = i->next)
    if (GFS_IS_VARIABLE_TRACER_VOF(i->data)) {
      if (!vof) vof = i->data;
      n++;
    }
  const guint calls = vof ? (guint)(((guint64)sim->time.i * n) % FTT_DIMENSION) : 0;
  if (calls == 0) return;
  GfsSimulation* empty = gfs_simulation_new(gfs_advection_class());
  GfsAdvectionParams par = GFS_VARIABLE_TRACER(vof)->advection;
  par.v = GFS_VARIABLE(vof);
  for (guint k = 0; k < calls; k++) gfs_tracer_vof_advection(GFS_DOMAIN(empty), &par);
  gts_object_destroy(GTS_OBJECT(empty));
}

/* ---- a cell's state as flat doubles ---- */

/* The state vector: face temporaries f[] then the variable slots from
 * place_holder on, named and temporary alike, as many as existed at step 0
 * (what a restore, which runs at step 0, finds in every cell). */
static void state_get(const FttCell* cell, gdouble* out, guint n) {
  GfsStateVector* s = GFS_STATE(cell);
  guint nf = 2 * FTT_NEIGHBORS;
  for (guint d = 0; d < FTT_NEIGHBORS; d++) {
    out[2 * d] = s->f[d].un;
    out[2 * d + 1] = s->f[d].v;
  }
  memcpy(out + nf, &s->place_holder, (n - nf) * sizeof(gdouble));
}

static void state_set(FttCell* cell, const gdouble* in, guint n) {
  GfsStateVector* s = GFS_STATE(cell);
  guint nf = 2 * FTT_NEIGHBORS;
  for (guint d = 0; d < FTT_NEIGHBORS; d++) {
    s->f[d].un = in[2 * d];
    s->f[d].v = in[2 * d + 1];
  }
  memcpy(&s->place_holder, in + nf, (n - nf) * sizeof(gdouble));
}

static void solid_get(const GfsSolidVector* v, gdouble* out) {
  memcpy(out, v->s, FTT_NEIGHBORS * sizeof(gdouble));
  out[FTT_NEIGHBORS] = v->a;
  out[FTT_NEIGHBORS + 1] = v->fv;
  memcpy(out + FTT_NEIGHBORS + 2, &v->cm, 3 * sizeof(gdouble));
  memcpy(out + FTT_NEIGHBORS + 5, &v->ca, 3 * sizeof(gdouble));
  memcpy(out + FTT_NEIGHBORS + 8, &v->v, 3 * sizeof(gdouble));
}

static void solid_set(GfsSolidVector* v, const gdouble* in) {
  memcpy(v->s, in, FTT_NEIGHBORS * sizeof(gdouble));
  v->a = in[FTT_NEIGHBORS];
  v->fv = in[FTT_NEIGHBORS + 1];
  memcpy(&v->cm, in + FTT_NEIGHBORS + 2, 3 * sizeof(gdouble));
  memcpy(&v->ca, in + FTT_NEIGHBORS + 5, 3 * sizeof(gdouble));
  memcpy(&v->v, in + FTT_NEIGHBORS + 8, 3 * sizeof(gdouble));
}

/* A cell's payload: {kind, cell flags above FTT's own, solid doubles (none
 * in a case without a solid), state doubles}. */
typedef struct {
  guint32 kind;
  guint32 flags;
} PayloadHead;

static void payload_from_cell(const CairnPersist* p, const FttCell* cell, void* out) {
  memset(out, 0, p->payload_size);
  PayloadHead* h = out;
  gdouble* solid = (gdouble*)(h + 1);
  if (cell == NULL || FTT_CELL_IS_DESTROYED(cell)) {
    h->kind = CP_LEAF_DESTROYED;
    return;
  }
  h->flags = cell->flags & ~((1u << FTT_FLAG_USER) - 1);
  if (GFS_IS_MIXED(cell)) {
    if (p->solid_doubles == 0) cp_fail(p, "a cell is cut by a solid although the case had none at step 0");
    h->kind = CP_LEAF_MIXED;
    solid_get(GFS_STATE(cell)->solid, solid);
  }
  state_get(cell, solid + p->solid_doubles, p->state_doubles);
}

static void payload_to_cell(const CairnPersist* p, const void* in, FttCell* cell) {
  const PayloadHead* h = in;
  const gdouble* solid = (const gdouble*)(h + 1);
  cell->flags = (cell->flags & ((1u << FTT_FLAG_USER) - 1)) | h->flags;
  GfsStateVector* s = GFS_STATE(cell);
  if ((h->kind & CP_LEAF_MIXED) && p->solid_doubles) {
    if (s->solid == NULL) s->solid = g_malloc0(sizeof(GfsSolidVector));
    solid_set(s->solid, solid);
  } else if (s->solid) {
    g_free(s->solid);
    s->solid = NULL;
  }
  state_set(cell, solid + p->solid_doubles, p->state_doubles);
}

/* ---- a tree independent of Gerris and cairn: what restore rebuilds from ---- */

typedef struct Node {
  struct Node* child[FTT_CELLS]; /* all NULL: a leaf */
  void* payload;                 /* leaves (octree mode) */
  FttCell* cell;                 /* stream mode: the cell of the simulation read back */
  gboolean destroyed;
} Node;

static void node_free(Node* n) {
  if (!n) return;
  for (int c = 0; c < FTT_CELLS; c++) node_free(n->child[c]);
  g_free(n->payload);
  g_free(n);
}

static gboolean node_is_leaf(const Node* n) {
  for (int c = 0; c < FTT_CELLS; c++)
    if (n->child[c]) return FALSE;
  return TRUE;
}

/* The Gerris child of a cell at an octant's coordinates. Gerris numbers
 * children with bit 0 for +x, bit 1 for -y and bit 2 for -z (ftt.c's coords
 * table); cairn's octants carry plain coordinates, x, y, z increasing. */
static int child_index_at(guint32 x, guint32 y, guint32 z, int level) {
  int shift = CAIRN_OCTREE_MAX_LEVEL - level;
  int k = (int)((x >> shift) & 1u) | (int)((((y >> shift) & 1u) ^ 1u) << 1);
#if !FTT_2D
  k |= (int)((((z >> shift) & 1u) ^ 1u) << 2);
#else
  (void)z;
#endif
  return k;
}

static gboolean always(FttCell* cell, gpointer data) {
  (void)cell;
  (void)data;
  return TRUE;
}

/* Makes the Gerris tree under `cell` match `n`: coarsen first (post-order, so
 * the finest go first and ftt_cell_coarsen keeps 2:1 by coarsening
 * neighbours), refine while copying (pre-order, ftt_cell_refine_single
 * refines neighbours 2:1 as the source tree, itself graded, also has them). */
static void coarsen_to(GfsDomain* domain, FttCell* cell, const Node* n) {
  if (FTT_CELL_IS_LEAF(cell) || FTT_CELL_IS_DESTROYED(cell)) return;
  if (n == NULL || node_is_leaf(n)) {
    ftt_cell_coarsen(cell, (FttCellCoarsenFunc)always, NULL, (FttCellCleanupFunc)gfs_cell_cleanup, domain);
    return;
  }
  FttCellChildren ch;
  ftt_cell_children(cell, &ch);
  for (int c = 0; c < FTT_CELLS; c++)
    if (ch.c[c]) coarsen_to(domain, ch.c[c], n->child[c]);
}

typedef void (*CopyFn)(CairnPersist* p, const Node* n, FttCell* cell, gpointer data);

static void refine_to(CairnPersist* p, GfsDomain* domain, FttCell* cell, const Node* n, CopyFn copy, gpointer data) {
  if (n->destroyed) {
    if (!FTT_CELL_IS_DESTROYED(cell)) ftt_cell_destroy(cell, (FttCellCleanupFunc)gfs_cell_cleanup, domain);
    return;
  }
  if (FTT_CELL_IS_DESTROYED(cell)) cp_fail(p, "a cell of the pool lies inside this case's solid");
  if (!node_is_leaf(n)) {
    if (FTT_CELL_IS_LEAF(cell)) ftt_cell_refine_single(cell, domain->cell_init, domain->cell_init_data);
    FttCellChildren ch;
    ftt_cell_children(cell, &ch);
    for (int c = 0; c < FTT_CELLS; c++) {
      FttCell* child = &cell->children->cell[c];
      (void)ch;
      if (n->child[c]) refine_to(p, domain, child, n->child[c], copy, data);
    }
  } else if (!FTT_CELL_IS_LEAF(cell)) {
    ftt_cell_coarsen(cell, (FttCellCoarsenFunc)always, NULL, (FttCellCleanupFunc)gfs_cell_cleanup, domain);
  }
  copy(p, n, cell, data);
}

/* No boundary condition and no restriction afterwards: the caller then
 * writes every cell, interior and ghost cells included, exactly as persisted
 * (a bc would rewrite face values of leaves next to a boundary). */
/* roots[k]: the tree of box k (p->boxes). Every box is coarsened before any
 * is refined: refining a cell next to another box refines that box's cells
 * too (2:1 across box boundaries), which its own coarsening must not undo. */
static void rebuild(CairnPersist* p, GfsSimulation* sim, Node* const* roots, CopyFn copy, gpointer data) {
  GfsDomain* domain = GFS_DOMAIN(sim);
  for (guint k = 0; k < p->boxes->len; k++) coarsen_to(domain, box_at(p, k)->root, roots[k]);
  for (guint k = 0; k < p->boxes->len; k++) refine_to(p, domain, box_at(p, k)->root, roots[k], copy, data);
  /* what gfs_domain_reshape does after an adaptation, without its grading
   * (the rebuilt tree is graded as it was) */
  gfs_domain_match(domain);
  gfs_set_merged(domain);
  for (GSList* i = domain->projections; i; i = i->next) gfs_domain_projection_reshape(i->data);
}

/* ---- octree mode ---- */

static void extra_cells(CairnPersist* p, GfsSimulation* sim, void (*fn)(FttCell*, gpointer), gpointer data);
static void preorder(FttCell* cell, void (*fn)(FttCell*, gpointer), gpointer data);
static void count_cell(FttCell* cell, gpointer data);
static void read_cell(FttCell* cell, gpointer data);
static void ghost_cells(CairnPersist* p, GfsSimulation* sim, void (*fn)(FttCell*, gpointer), gpointer data);
typedef struct {
  CairnPersist* p;
  FILE* f;
  char* buf;
} CellIO;

typedef struct {
  const Staged* st;
  guint64 written;
} Mirror;

/* The PM-octree follows the snapshot in one traversal (cairn_octree_follow):
 * the handles are its nodes. A destroyed cell (outside a solid) has no
 * children here and is stored as a leaf of kind CP_LEAF_DESTROYED. */
static int mirror_children(const cairn_octant* o, const void* handle, const void** out, void* user) {
  const Mirror* m = user;
  const SnapNode* n = handle;
  if (n->first < 0) return 0;
  /* cairn's child k has bit 0 = x, bit 1 = y, bit 2 = z (upper halves);
   * child_index_at gives Gerris's index of the child holding a point. */
  const guint32 half = 1u << (CAIRN_OCTREE_MAX_LEVEL - o->level - 1);
  for (int k = 0; k < (1 << FTT_DIMENSION); k++) {
    guint32 x = o->x + ((k & 1) ? half : 0u), y = o->y + ((k & 2) ? half : 0u), z = o->z + ((k & 4) ? half : 0u);
    out[k] = &m->st->nodes[n->first + child_index_at(x, y, z, o->level + 1)];
  }
  return 1;
}

static void mirror_init(const cairn_octant* o, void* data, const void* parent, void* user) {
  (void)o;
  (void)parent;
  const Mirror* m = user;
  memset(data, 0, m->st->payload_size); /* kind 0 and zeros never equal a real cell: update writes it */
  ((PayloadHead*)data)->kind = 0xffffffffu;
}

static int mirror_update(const cairn_octant* o, const void* handle, void* data, void* user) {
  (void)o;
  Mirror* m = user;
  const size_t size = m->st->payload_size;
  const char* payload = m->st->leaves + (size_t)((const SnapNode*)handle)->leaf * size;
  if (memcmp(payload, data, size) == 0) return 0;
  memcpy(data, payload, size);
  m->written++;
  return 1;
}

/* What to do about a PM-octree call's failure, appended to its message. */
static const char* octree_hint(int rc) {
  return rc == CAIRN_E_OUT_OF_SPACE ? " (run afresh with a larger CAIRN_GERRIS_POOL_SIZE, in bytes)" : "";
}

static void octree_check(CairnPersist* p, int rc, const char* what) {
  if (rc != 0) cp_fail(p, "%s failed: %s%s", what, cairn_errormsg(), octree_hint(rc));
}

static void* buffer_at(Buffer* b, size_t used, size_t more) {
  if (used + more > b->capacity) {
    b->capacity = MAX(2 * b->capacity, used + more);
    b->data = g_realloc(b->data, b->capacity);
  }
  return b->data + used;
}

typedef struct {
  CairnPersist* p;
  guint32 nodes, leaves, cells;
} Snap;

/* The payload of `cell` appended to `b`, which holds `*count` of them. */
static void append_payload(const CairnPersist* p, const FttCell* cell, Buffer* b, guint32* count) {
  payload_from_cell(p, cell, buffer_at(b, (size_t)(*count)++ * p->payload_size, p->payload_size));
}

/* Node `at` of the snapshot from `cell`, pre-order: a leaf's payload into
 * the leaves, an interior cell's into the extra cells (interior_preorder's
 * order, which restore reads back). */
static void snap_cell(Snap* s, const FttCell* cell, guint32 at) {
  CairnPersist* p = s->p;
  SnapNode* n = (SnapNode*)p->nodes.data + at;
  if (FTT_CELL_IS_DESTROYED(cell) || FTT_CELL_IS_LEAF(cell)) {
    n->first = -1;
    n->leaf = s->leaves;
    append_payload(p, cell, &p->leaves, &s->leaves);
    return;
  }
  append_payload(p, cell, &p->cells, &s->cells);
  const guint32 first = s->nodes;
  s->nodes += FTT_CELLS;
  buffer_at(&p->nodes, (size_t)first * sizeof(SnapNode), FTT_CELLS * sizeof(SnapNode));
  ((SnapNode*)p->nodes.data + at)->first = (gint32)first; /* the array may have moved */
  for (int c = 0; c < FTT_CELLS; c++) snap_cell(s, &cell->children->cell[c], first + c);
}

/* Node `at`, `levels` above the boxes, routing to box slots slot * FTT_CELLS^levels
 * and on (see "the boxes"): an empty slot is a leaf of kind CP_LEAF_DESTROYED. */
static void snap_forest(Snap* s, guint levels, guint32 at, guint slot) {
  CairnPersist* p = s->p;
  if (levels == 0) {
    if (slot < p->boxes->len) {
      snap_cell(s, box_at(p, slot)->root, at);
    } else {
      SnapNode* n = (SnapNode*)p->nodes.data + at;
      n->first = -1;
      n->leaf = s->leaves;
      append_payload(p, NULL, &p->leaves, &s->leaves);
    }
    return;
  }
  const guint32 first = s->nodes;
  s->nodes += FTT_CELLS;
  buffer_at(&p->nodes, (size_t)first * sizeof(SnapNode), FTT_CELLS * sizeof(SnapNode));
  ((SnapNode*)p->nodes.data + at)->first = (gint32)first;
  for (int c = 0; c < FTT_CELLS; c++) snap_forest(s, levels - 1, first + c, slot * FTT_CELLS + c);
}

static void snap_ghost(FttCell* cell, gpointer data) {
  Snap* s = data;
  append_payload(s->p, cell, &s->p->cells, &s->cells);
}

/* Gerris's part of a persist: a snapshot of the tree (every leaf's payload,
 * the cells that have children, the ghost cells) and the header, in memory.
 * The PM-octree follows the snapshot in the writing. */
static gboolean resume_requested(const CairnPersist* p);

static void persist_stage(CairnPersist* p, GfsSimulation* sim, Staged* st) {
  const double t0 = now_seconds();
  Snap snap = {p, 1, 0, 0};
  buffer_at(&p->nodes, 0, sizeof(SnapNode));
  snap_forest(&snap, p->forest_levels, 0, 0);
  ghost_cells(p, sim, snap_ghost, &snap);
  const double t1 = now_seconds();
  p->gather_s += t1 - t0;
  st->tree = p->tree;
  st->payload_size = p->payload_size;
  st->nodes = (const SnapNode*)p->nodes.data;
  st->leaves = p->leaves.data;
  st->cells = p->cells.data;
  st->cells_bytes = (size_t)snap.cells * p->payload_size;
  st->next = cairn_octree_version(p->tree) + 1;
  st->step = sim->time.i;
  st->rank = p->rank;
  st->armed = !resume_requested(p);
  st->uri = stream_uri(p, st->next % 2 ? "hdr1" : "hdr0");
  st->error = NULL;
  FILE* f = open_memstream(&st->header, &st->header_bytes);
  if (f == NULL) cp_fail(p, "out of memory for the header");
  write_header(p, sim, f, st->next);
  const guint64 extra = snap.cells;
  fwrite(&extra, sizeof extra, 1, f);
  if (fclose(f) != 0) cp_fail(p, "out of memory for the header");
  p->header_s += now_seconds() - t1;
}

/* The durable part: the PM-octree's working version follows the snapshot
 * (only changed leaves are written), the header is committed to slot
 * next % 2, then the PM-octree is persisted as `next` (see "Order of
 * durability"). Touches no Gerris data, so it may run beside the next time
 * step (async = 1). */
static gpointer persist_write(gpointer data) {
  Staged* st = data;
  const double t0 = now_seconds();
  Mirror m = {st, 0};
  const int rc = cairn_octree_follow(st->tree, &st->nodes[0], mirror_children, mirror_init, mirror_update, &m);
  const double t1 = now_seconds();
  st->follow_s = t1 - t0;
  st->written = m.written;
  FILE* f = NULL;
  if (rc != 0)
    st->error = g_strdup_printf("cairn_octree_follow failed: %s%s", cairn_errormsg(), octree_hint(rc));
  else if ((f = cairn_stream_open(st->uri, "w", 0)) == NULL) {
    st->error = g_strdup_printf("cannot open %s: %s", st->uri, cairn_errormsg());
  } else {
    fwrite(st->header, 1, st->header_bytes, f);
    fwrite(st->cells, 1, st->cells_bytes, f);
    if (fclose(f) != 0) st->error = g_strdup_printf("cannot commit %s: %s", st->uri, cairn_stream_errormsg());
  }
  const char *kill_in = getenv("CAIRN_GERRIS_KILL_IN_PERSIST"), *kill_rank = getenv("CAIRN_GERRIS_KILL_RANK");
  if (st->error == NULL && kill_in && st->armed && st->step == (guint64)atoll(kill_in) &&
      (kill_rank == NULL || atoi(kill_rank) == st->rank)) {
    if (kill_rank)
      fprintf(stderr, "CairnPersist: rank %d killing itself inside the persist of step %llu\n", st->rank,
              (unsigned long long)st->step);
    raise(SIGKILL);
  }
  uint64_t version = 0;
  if (st->error == NULL && cairn_octree_persist(st->tree, &version) != 0)
    st->error = g_strdup_printf("cairn_octree_persist failed: %s", cairn_errormsg());
  else if (st->error == NULL && version != st->next)
    st->error = g_strdup_printf("PM-octree persisted as version %llu, expected %llu", (unsigned long long)version,
                                (unsigned long long)st->next);
  st->write_s = now_seconds() - t1;
  free(st->header);
  st->header = NULL;
  g_free(st->uri);
  st->uri = NULL;
  return NULL;
}

/* A written persist's figures; exits with its error. */
static void persist_written(CairnPersist* p) {
  const Staged* st = &p->staged;
  if (st->error) cp_fail(p, "%s", st->error);
  p->follow_s += st->follow_s;
  p->write_s += st->write_s;
  p->cells_written += st->written;
  p->bytes += st->header_bytes + st->cells_bytes + st->written * st->payload_size;
}

/* Waits for the persist still being written (async = 1). */
static void persist_wait(CairnPersist* p) {
  if (p->writer == NULL) return;
  const double t0 = now_seconds();
  g_thread_join(p->writer);
  p->wait_s += now_seconds() - t0;
  p->writer = NULL;
  persist_written(p);
}

#ifdef CAIRN_GERRIS_DIST
static void use_lane(CairnPersist* p, guint lane);
static void agree(CairnPersist* p);
#endif

static void agree_pending(CairnPersist* p) {
#ifdef CAIRN_GERRIS_DIST
  if (p->parallel) agree(p);
#else
  (void)p;
#endif
}

static void persist_octree(CairnPersist* p, GfsSimulation* sim) {
  persist_wait(p);
  if (p->parallel) {
#ifdef CAIRN_GERRIS_DIST
    agree_pending(p); /* the step before, durable here: agreed once durable everywhere */
    use_lane(p, (guint)((cp_dist_version() + 1) % 2));
#endif
  }
  persist_stage(p, sim, &p->staged);
  p->pending = p->parallel;
  p->pending_step = sim->time.i;
  p->pending_version = p->staged.next;
  if (p->async)
    p->writer = g_thread_new("cairn-persist", persist_write, &p->staged);
  else {
    persist_write(&p->staged);
    persist_written(p);
    agree_pending(p);
  }
}

typedef struct {
  CairnPersist* p;
  Node* root;
} Collect;

static void collect_leaf(const cairn_octant* o, const void* data, void* user) {
  Collect* c = user;
  Node* n = c->root;
  for (int l = 1; l <= o->level; l++) {
    int k = child_index_at(o->x, o->y, o->z, l);
    if (n->child[k] == NULL) {
      for (int s = 0; s < FTT_CELLS; s++) n->child[s] = g_new0(Node, 1);
    }
    n = n->child[k];
  }
  n->payload = g_memdup2(data, c->p->payload_size);
  n->destroyed = ((const PayloadHead*)data)->kind == CP_LEAF_DESTROYED;
}

static void copy_payload(CairnPersist* p, const Node* n, FttCell* cell, gpointer data) {
  (void)data;
  if (n->payload) payload_to_cell(p, n->payload, cell);
}

/* Restores the PM-octree at octree_path into p->tree, without touching Gerris. */
static void open_tree(CairnPersist* p, GfsSimulation* sim) {
  gchar* path = octree_path(p);
  cairn_octree_options o;
  cairn_octree_options_init(&o);
  o.dims = FTT_DIMENSION;
  o.data_size = p->payload_size;
  /* No C0: every leaf is rewritten at every persist, so a block kept in DRAM
   * would only be copied into the pool at the next commit. Measured on
   * shear2D (151 persists, five alternating runs each): the same time per
   * persist (2.36-2.70 ms without C0, 2.42-2.69 ms with the default
   * budget) and 11 MB less memory. */
  o.dram_budget = 0;
  int rc = cairn_octree_restore(path, &o, &p->tree);
  if (rc == CAIRN_E_LAYOUT_MISMATCH) {
    /* another payload size or dimension: the header says which */
    for (int slot = 0; slot < 2; slot++) {
      gchar* uri = stream_uri(p, slot ? "hdr1" : "hdr0");
      FILE* f = cairn_stream_open(uri, "r", 0);
      g_free(uri);
      if (f == NULL) continue;
      Header h;
      g_free(read_header(p, sim, f, &h));
      fclose(f);
    }
    cp_fail(p, "%s holds another dimension or cell layout (%s)", path, cairn_errormsg());
  }
  if (rc != 0) cp_fail(p, "cannot resume from %s: %s", path, cairn_errormsg());
  g_free(path);
}

static void restore_octree(CairnPersist* p, GfsSimulation* sim) {
  open_tree(p, sim);
  gchar* path = octree_path(p);
  guint64 version = cairn_octree_version(p->tree);
  gchar* uri = stream_uri(p, version % 2 ? "hdr1" : "hdr0");
  FILE* f = cairn_stream_open(uri, "r", 0);
  if (f == NULL) cp_fail(p, "cannot read %s: %s", uri, cairn_errormsg());
  Header h;
  EventState* s = read_header(p, sim, f, &h);
  guint64 ghosts = 0;
  if (fread(&ghosts, sizeof ghosts, 1, f) != 1 || ghosts > (1ull << 32)) cp_fail(p, "%s: truncated", uri);
  char* ghost_data = read_items(f, p->payload_size, ghosts);
  if (ghost_data == NULL)
    cp_fail(p,
            "%s: truncated or damaged (it counts %llu interior and ghost cells it does not hold); remove %s/%s.* to "
            "start afresh",
            uri, (unsigned long long)ghosts, p->dir, p->name);
  fclose(f);
  if (h.octree_version != version)
    cp_fail(p, "%s belongs to version %llu, the PM-octree is at %llu", uri, (unsigned long long)h.octree_version,
            (unsigned long long)version);
  g_free(uri);

  Collect c = {p, g_new0(Node, 1)};
  octree_check(p, cairn_octree_visit_leaves(p->tree, collect_leaf, &c), "cairn_octree_visit_leaves");
  /* box slot k: its digits in base FTT_CELLS route from the root (see "the boxes") */
  Node** roots = g_new0(Node*, p->boxes->len);
  for (guint k = 0; k < p->boxes->len; k++) {
    Node* n = c.root;
    for (guint l = p->forest_levels; l > 0 && n; l--) {
      guint digit = k;
      for (guint j = 1; j < l; j++) digit /= FTT_CELLS;
      n = n->child[digit % FTT_CELLS];
    }
    if (n == NULL || n->destroyed) cp_fail(p, "%s holds no tree for box %u", path, box_at(p, k)->id);
    roots[k] = n;
  }
  rebuild(p, sim, roots, copy_payload, NULL);
  g_free(roots);
  node_free(c.root);
  guint64 rebuilt = 0;
  extra_cells(p, sim, count_cell, &rebuilt);
  if (rebuilt != ghosts)
    cp_fail(p, "rebuilt %llu interior and ghost cells, the header holds %llu", (unsigned long long)rebuilt,
            (unsigned long long)ghosts);
  CellIO gio = {p, NULL, ghost_data};
  extra_cells(p, sim, read_cell, &gio);
  g_free(ghost_data);
  g_free(path);
  apply_header(p, sim, &h, s);
  g_free(s);
}

/* The PM-octree pool: CAIRN_GERRIS_POOL_SIZE bytes, else sixteen times what
 * one version of the starting mesh takes (every cell a payload and a child
 * reference, a quarter more for block headers), at least 64 MiB. The tree
 * collects once it has doubled, so this leaves the mesh room to grow about
 * fivefold. The pool reserves its space as the tree uses it (the default
 * of cairn_octree_options_init): a run pays for the blocks it uses, not
 * for sixteen versions up front (447 MB of tmpfs for shear2D at level 8). */
static guint64 octree_pool_size(CairnPersist* p, GfsSimulation* sim) {
  const char* size = getenv("CAIRN_GERRIS_POOL_SIZE");
  if (size) return g_ascii_strtoull(size, NULL, 10);
  (void)sim;
  guint64 cells = 0;
  for (guint k = 0; k < p->boxes->len; k++) preorder(box_at(p, k)->root, count_cell, &cells);
  const guint64 version = cells * (p->payload_size + 8) * 5 / 4;
  return MAX(16 * version, (guint64)64 << 20);
}

static void create_octree(CairnPersist* p, GfsSimulation* sim) {
  gchar* path = octree_path(p);
  cairn_octree_remove(path);
  cairn_octree_options o;
  cairn_octree_options_init(&o);
  o.dims = FTT_DIMENSION;
  o.data_size = p->payload_size;
  o.pool_size = octree_pool_size(p, sim);
  o.dram_budget = 0; /* no C0: see restore_octree */
  if (cairn_octree_create(path, &o, &p->tree) != 0) cp_fail(p, "cannot create %s: %s", path, cairn_errormsg());
  g_free(path);
}

/* ---- stream mode ---- */

/* What Gerris's writer leaves out, for a bit-identical restart: the face
 * temporaries, the unnamed variable slots and the solid vector's fv and v.
 * Written before Gerris's text (a GtsFile reads ahead, so nothing can follow
 * it): a count, then every live cell's whole state, pre-order. */
static void preorder(FttCell* cell, void (*fn)(FttCell*, gpointer), gpointer data) {
  if (FTT_CELL_IS_DESTROYED(cell)) return;
  fn(cell, data);
  if (!FTT_CELL_IS_LEAF(cell))
    for (int c = 0; c < FTT_CELLS; c++) preorder(&cell->children->cell[c], fn, data);
}

/* The ghost cells of the box's boundaries (GfsBoundary objects: an inflow,
 * an outflow), pre-order. Gerris keeps values there between steps that the
 * boundary conditions applied at a restore would not reproduce (measured:
 * another time step one step after a restore of the solid3D case). */
static void ghost_cells(CairnPersist* p, GfsSimulation* sim, void (*fn)(FttCell*, gpointer), gpointer data) {
  (void)sim;
  for (guint k = 0; k < p->boxes->len; k++) {
    GfsBox* box = box_at(p, k);
    for (int d = 0; d < FTT_NEIGHBORS; d++)
      if (box->neighbor[d] && GFS_IS_BOUNDARY(box->neighbor[d]) && GFS_BOUNDARY(box->neighbor[d])->root)
        preorder(GFS_BOUNDARY(box->neighbor[d])->root, fn, data);
  }
}

static void interior_preorder(FttCell* cell, void (*fn)(FttCell*, gpointer), gpointer data) {
  if (FTT_CELL_IS_DESTROYED(cell) || FTT_CELL_IS_LEAF(cell)) return;
  fn(cell, data);
  for (int c = 0; c < FTT_CELLS; c++) interior_preorder(&cell->children->cell[c], fn, data);
}

/* The cells of each box that have children, box after box, then the ghost
 * cells: what the octree mode keeps beside the PM-octree's leaves, in the
 * header stream. */
static void extra_cells(CairnPersist* p, GfsSimulation* sim, void (*fn)(FttCell*, gpointer), gpointer data) {
  for (guint k = 0; k < p->boxes->len; k++) interior_preorder(box_at(p, k)->root, fn, data);
  ghost_cells(p, sim, fn, data);
}

/* Every cell of each box, box after box, then the ghost cells. */
static void all_cells(CairnPersist* p, GfsSimulation* sim, void (*fn)(FttCell*, gpointer), gpointer data) {
  for (guint k = 0; k < p->boxes->len; k++) preorder(box_at(p, k)->root, fn, data);
  ghost_cells(p, sim, fn, data);
}

static void count_cell(FttCell* cell, gpointer data) {
  (void)cell;
  (*(guint64*)data)++;
}

static void write_cell(FttCell* cell, gpointer data) {
  CellIO* io = data;
  payload_from_cell(io->p, cell, io->buf);
  fwrite(io->buf, io->p->payload_size, 1, io->f);
}

static void read_cell(FttCell* cell, gpointer data) {
  CellIO* io = data;
  payload_to_cell(io->p, io->buf, cell);
  io->buf += io->p->payload_size;
}

static guint64 persist_stream(CairnPersist* p, GfsSimulation* sim) {
  GfsDomain* domain = GFS_DOMAIN(sim);
  gchar* uri = stream_uri(p, "sim");
  FILE* f = cairn_stream_open(uri, "w", 0);
  if (f == NULL) cp_fail(p, "cannot open %s: %s", uri, cairn_errormsg());
  write_header(p, sim, f, 0);
  guint64 cells = 0;
  all_cells(p, sim, count_cell, &cells);
  fwrite(&cells, sizeof cells, 1, f);
  CellIO cio = {p, f, g_malloc(p->payload_size)};
  all_cells(p, sim, write_cell, &cio);
  g_free(cio.buf);
  /* Gerris's own writer, binary, every named variable, every level */
  GSList* io = domain->variables_io;
  gboolean binary = domain->binary;
  domain->variables_io = NULL;
  for (GSList* i = domain->variables; i; i = i->next)
    if (GFS_VARIABLE(i->data)->name) domain->variables_io = g_slist_append(domain->variables_io, i->data);
  domain->binary = TRUE;
  gfs_simulation_write(sim, -1, f);
  g_slist_free(domain->variables_io);
  domain->variables_io = io;
  domain->binary = binary;
  long bytes = ftell(f);
  if (fclose(f) != 0) cp_fail(p, "cannot commit %s: %s", uri, cairn_stream_errormsg());
  g_free(uri);
  return (guint64)bytes;
}

static Node* node_from_cell(FttCell* cell) {
  Node* n = g_new0(Node, 1);
  n->cell = cell;
  n->destroyed = FTT_CELL_IS_DESTROYED(cell);
  if (!n->destroyed && !FTT_CELL_IS_LEAF(cell))
    for (int c = 0; c < FTT_CELLS; c++) n->child[c] = node_from_cell(&cell->children->cell[c]);
  return n;
}

typedef struct {
  GSList *from, *to; /* matching variables, by name */
} VarMap;

static void copy_values(CairnPersist* p, const Node* n, FttCell* cell, gpointer data) {
  (void)p;
  VarMap* m = data;
  const FttCell* src = n->cell;
  cell->flags = (cell->flags & ((1u << FTT_FLAG_USER) - 1)) | (src->flags & ~((1u << FTT_FLAG_USER) - 1));
  GfsStateVector* s = GFS_STATE(cell);
  if (GFS_IS_MIXED(src)) {
    if (s->solid == NULL) s->solid = g_malloc0(sizeof(GfsSolidVector));
    gdouble tmp[CP_SOLID_DOUBLES];
    solid_get(GFS_STATE(src)->solid, tmp);
    solid_set(s->solid, tmp);
  } else if (s->solid) {
    g_free(s->solid);
    s->solid = NULL;
  }
  for (GSList *i = m->from, *j = m->to; i; i = i->next, j = j->next)
    GFS_VALUE(cell, GFS_VARIABLE(j->data)) = GFS_VALUE(src, GFS_VARIABLE(i->data));
}

static void restore_stream(CairnPersist* p, GfsSimulation* sim) {
  gchar* uri = stream_uri(p, "sim");
  FILE* f = cairn_stream_open(uri, "r", 0);
  if (f == NULL) cp_fail(p, "cannot resume from %s: %s", uri, cairn_errormsg());
  Header h;
  EventState* s = read_header(p, sim, f, &h);
  guint64 cells = 0;
  if (fread(&cells, sizeof cells, 1, f) != 1 || cells > (1ull << 40)) cp_fail(p, "%s: truncated", uri);
  char* supplement = read_items(f, p->payload_size, cells);
  if (supplement == NULL)
    cp_fail(p, "%s: truncated or damaged (it counts %llu cells it does not hold); remove %s/%s.* to start afresh", uri,
            (unsigned long long)cells, p->dir, p->name);
  /* Gerris's own reader, on the rest of the stream */
  GtsFile* fp = gts_file_new(f);
  GfsSimulation* snap = gfs_simulation_read(fp);
  if (snap == NULL) cp_fail(p, "%s: line %d: %s", uri, fp->line, fp->error);
  gts_file_destroy(fp);
  fclose(f);

  VarMap m = {NULL, NULL};
  for (GSList* i = GFS_DOMAIN(snap)->variables; i; i = i->next) {
    GfsVariable* v = i->data;
    GfsVariable* w = v->name ? gfs_variable_from_name(GFS_DOMAIN(sim)->variables, v->name) : NULL;
    if (w) {
      m.from = g_slist_append(m.from, v);
      m.to = g_slist_append(m.to, w);
    }
  }
  /* the boxes read back, matched to ours by id */
  GPtrArray* theirs = sorted_boxes(snap);
  if (theirs->len != p->boxes->len)
    cp_fail(p, "%s holds %u boxes, this simulation has %u", uri, theirs->len, p->boxes->len);
  Node** roots = g_new0(Node*, p->boxes->len);
  for (guint k = 0; k < p->boxes->len; k++) {
    GfsBox* b = g_ptr_array_index(theirs, k);
    if (b->id != box_at(p, k)->id)
      cp_fail(p, "%s holds box %u where this simulation has box %u", uri, b->id, box_at(p, k)->id);
    roots[k] = node_from_cell(b->root);
  }
  rebuild(p, sim, roots, copy_values, &m);
  for (guint k = 0; k < p->boxes->len; k++) node_free(roots[k]);
  g_free(roots);
  g_ptr_array_free(theirs, TRUE);
  guint64 rebuilt = 0;
  all_cells(p, sim, count_cell, &rebuilt);
  if (rebuilt != cells)
    cp_fail(p, "rebuilt %llu cells, the stream holds %llu", (unsigned long long)rebuilt, (unsigned long long)cells);
  CellIO io = {p, NULL, supplement};
  all_cells(p, sim, read_cell, &io);
  g_free(supplement);
  g_free(uri);
  g_slist_free(m.from);
  g_slist_free(m.to);
  gts_object_destroy(GTS_OBJECT(snap));
  apply_header(p, sim, &h, s);
  g_free(s);
}

/* ---- the event ---- */

static gboolean resume_requested(const CairnPersist* p) {
  const char* e = getenv("CAIRN_GERRIS_RESUME");
  return p->resume_option > 0 || (e && strcmp(e, "0") != 0 && e[0] != '\0');
}

/* ---- parallel runs ---- */

/* Parallel runs: every process persists the boxes it owns in pools of its
 * own (DIR/NAME.rank<R>/, in dist's directory for its node), and a step
 * becomes the run's through cairn::dist's collective commit
 * (cairn_gerris_dist.cpp): once a process's persist of step n is durable,
 * it commits a record {n, lane, PM-octree version} as dist version V, and
 * dist agrees on V once every process's record is durable. A process's
 * PM-octree restores only its newest version, and a process may have
 * persisted step n+1 while another died before: so each process keeps two
 * lanes of pools, V's persist going to lane V % 2 only after V - 1 was
 * agreed on (the persist of V is staged after the commit of V - 1), and
 * lane G % 2 still holds the agreed version G on every process when any
 * fails (dist.hpp's I1-I3). Asynchronous persists stay asynchronous: the
 * commit of a step's record runs in Gerris's thread (MPI is initialised for
 * one thread) at the next persist, once the writing thread is done, so a
 * step is agreed during the step after it, a crash before that resuming the
 * whole run one step earlier. The rank count that wrote the pools is
 * recorded (DIR/NAME.ranks): a resume on another count is refused naming
 * it (boxes are not redistributed). Octree mode only. */

/* DIR/NAME.ranks: the process count of the parallel run that wrote the pools. */
static gchar* ranks_path(const CairnPersist* p, const char* dir) {
  return g_strdup_printf("%s/%s.ranks", dir, p->base_name);
}

#ifdef CAIRN_GERRIS_DIST
static void use_lane(CairnPersist* p, guint lane) {
  p->lane = lane;
  p->tree = p->lane_tree[lane];
  g_free(p->name);
  p->name = g_strdup_printf("%s.%c", p->base_name, 'a' + lane);
}

/* Agrees on the persist staged last, durable on this process by now. */
static void agree(CairnPersist* p) {
  if (!p->pending) return;
  cp_dist_record r = {p->pending_step, p->lane, p->pending_version, 0};
  guint64 version = 0;
  char err[512];
  if (cp_dist_commit(&r, &version, err, sizeof err) != 0) cp_fail(p, "the collective commit failed: %s", err);
  p->pending = FALSE;
}

/* Joins the run's agreement (collective) and moves the pools to this
 * process's directory. On resume, `restored` is the agreed record. */
static void start_parallel(CairnPersist* p, GfsSimulation* sim, cp_dist_record* restored) {
  if (p->mode != CP_MODE_OCTREE)
    cp_fail(p,
            "a parallel run persists in mode = octree only (mode = stream reads Gerris's snapshot format, which "
            "is written per process)");
  const gboolean resume = resume_requested(p);
  gchar* top = p->dir;
  if (resume && !g_file_test(top, G_FILE_TEST_IS_DIR))
    cp_fail(p, "cannot resume: nothing was persisted in %s (no such directory)", top);
  if (g_mkdir_with_parents(top, 0755) != 0) cp_fail(p, "cannot create the directory %s", top);
  char storage[4096], err[1024];
  if (cp_dist_open(top, p->base_name, resume, restored, &p->rank, &p->ranks, storage, sizeof storage, err,
                   sizeof err) != 0)
    cp_fail(p, "cannot join the run's agreement (cairn::dist): %s", err);
  gchar* rpath = ranks_path(p, top);
  if (resume) {
    gchar* text = NULL;
    if (g_file_get_contents(rpath, &text, NULL, NULL)) {
      const int wrote = atoi(text);
      g_free(text);
      if (wrote != p->ranks)
        cp_fail(p,
                "the pools were written by a run on %d processes, this one runs on %d: resume it on %d (mpirun -np "
                "%d), or remove %s/%s.* to start afresh",
                wrote, p->ranks, wrote, wrote, top, p->base_name);
    }
    if (restored->dist_version == 0)
      cp_fail(p, "cannot resume: no step was agreed on by every process of a run on %d processes in %s", p->ranks, top);
  } else if (p->rank == 0) {
    gchar* text = g_strdup_printf("%d\n", p->ranks);
    GError* e = NULL;
    if (!g_file_set_contents(rpath, text, -1, &e)) cp_fail(p, "cannot write %s: %s", rpath, e->message);
    g_free(text);
  }
  g_free(rpath);
  p->dir = g_strdup_printf("%s/%s.rank%d", storage, p->base_name, p->rank);
  g_free(top);
  (void)sim;
}
#endif

static void open_tree(CairnPersist* p, GfsSimulation* sim);

static void start(CairnPersist* p, GfsSimulation* sim) {
  GfsDomain* domain = GFS_DOMAIN(sim);
  p->rank = 0;
  p->ranks = 1;
  p->base_name = g_strdup(p->name);
#ifdef CAIRN_GERRIS_DIST
  cp_dist_record restored;
  memset(&restored, 0, sizeof restored);
  if (domain->pid >= 0) {
    p->parallel = TRUE;
    start_parallel(p, sim, &restored);
  }
#else
  if (domain->pid >= 0) cp_fail(p, "this module was built without MPI: it cannot persist a parallel run");
#endif
  p->boxes = sorted_boxes(sim);
  if (p->boxes->len == 0) cp_fail(p, "the simulation has no box");
  p->forest_levels = 0;
  for (guint64 slots = 1; slots < p->boxes->len; slots *= FTT_CELLS) p->forest_levels++;
  p->graph = box_graph(p->boxes, p->ranks);
  p->started = TRUE;
  p->events = g_ptr_array_new();
  for (GSList* i = sim->events->items; i; i = i->next) g_ptr_array_add(p->events, i->data);
  p->signature = case_signature(sim);
  p->state_doubles =
      2 * FTT_NEIGHBORS +
      (gfs_domain_variables_size(domain) - G_STRUCT_OFFSET(GfsStateVector, place_holder)) / sizeof(gdouble);
  /* Solids are events of the .gfs: a case without one at step 0 never has
   * a cut cell, and its payload leaves the solid's 15 doubles out (shear2D:
   * 216 bytes a cell instead of 336). */
  p->solid_doubles = sim->solids->items ? CP_SOLID_DOUBLES : 0;
  p->payload_size = sizeof(PayloadHead) + (p->solid_doubles + p->state_doubles) * sizeof(gdouble);
  /* A resume creates nothing: a failed one leaves no empty directory behind. */
  if (resume_requested(p) && !g_file_test(p->dir, G_FILE_TEST_IS_DIR)) {
    if (p->parallel)
      cp_fail(p,
              "cannot resume: the pools of process %d are missing (%s; its node lost? partner copies of the "
              "module's pools are not implemented)",
              p->rank, p->dir);
    cp_fail(p, "cannot resume: nothing was persisted in %s (no such directory)", p->dir);
  }
  if (g_mkdir_with_parents(p->dir, 0755) != 0) cp_fail(p, "cannot create the directory %s", p->dir);
  gchar* rpath = p->parallel ? NULL : ranks_path(p, p->dir);
  if (rpath && resume_requested(p) && g_file_test(rpath, G_FILE_TEST_EXISTS)) {
    gchar* text = NULL;
    g_file_get_contents(rpath, &text, NULL, NULL);
    cp_fail(p, "the pools were written by a run on %d processes, this one is serial: resume it on %d (mpirun -np %d)",
            text ? atoi(text) : 0, text ? atoi(text) : 0, text ? atoi(text) : 0);
  }
  if (rpath && !resume_requested(p)) remove(rpath); /* a fresh serial run: no parallel run's pools resume */
  g_free(rpath);

  if (p->parallel) {
#ifdef CAIRN_GERRIS_DIST
    if (resume_requested(p)) {
      /* the agreed step is in lane restored.lane; the other lane is only
       * reopened, to be written next */
      double t0 = now_seconds();
      const guint lane = (guint)restored.lane & 1u;
      use_lane(p, lane ^ 1u);
      open_tree(p, sim);
      p->lane_tree[lane ^ 1u] = p->tree;
      use_lane(p, lane);
      restore_octree(p, sim);
      p->lane_tree[lane] = p->tree;
      if (cairn_octree_version(p->tree) != restored.octree_version || sim->time.i != restored.step)
        cp_fail(p,
                "the agreed step %llu (PM-octree version %llu of lane %c) is not what this process's lane holds "
                "(step %u, version %llu)",
                (unsigned long long)restored.step, (unsigned long long)restored.octree_version, 'a' + lane, sim->time.i,
                (unsigned long long)cairn_octree_version(p->tree));
      align_vof_sweeps(sim);
      fprintf(stderr, "CairnPersist: rank %d resumed at step %u (agreed version %llu) t = %.17g in %.6f s\n", p->rank,
              sim->time.i, (unsigned long long)restored.dist_version, sim->time.t, now_seconds() - t0);
    } else {
      for (guint lane = 0; lane < 2; lane++) {
        use_lane(p, lane);
        create_octree(p, sim);
        p->lane_tree[lane] = p->tree;
      }
    }
#endif
  } else if (resume_requested(p)) {
    double t0 = now_seconds();
    if (p->mode == CP_MODE_OCTREE)
      restore_octree(p, sim);
    else
      restore_stream(p, sim);
    align_vof_sweeps(sim);
    if (getenv("CAIRN_GERRIS_STATS"))
      fprintf(stderr, "CairnPersist: resumed at step %u t = %.17g in %.6f s\n", sim->time.i, sim->time.t,
              now_seconds() - t0);
  } else if (p->mode == CP_MODE_OCTREE) {
    create_octree(p, sim);
  } else {
    gchar* uri = stream_uri(p, "sim");
    cairn_stream_remove(uri); /* a fresh run: nothing of an earlier one may be resumed */
    g_free(uri);
  }
}

static gboolean cairn_persist_event(GfsEvent* event, GfsSimulation* sim) {
  CairnPersist* p = CAIRN_PERSIST(event);
  if (event->redo) {
    /* gfs_simulation_init re-does every event after each start-up adaptation,
     * before the time loop: not a step, nothing to persist or restore yet */
    event->redo = FALSE;
    return FALSE;
  }
  if (!p->started) {
    start(p, sim);
    if (resume_requested(p)) return FALSE; /* the restored state is the persisted one: nothing to write */
  }
  GfsEventClass* parent = GFS_EVENT_CLASS(GTS_OBJECT_CLASS(cairn_persist_class())->parent_class);
  if (!(*parent->event)(event, sim)) return FALSE;

  const char* kill_at = getenv("CAIRN_GERRIS_KILL_AT");
  const char* kill_rank = getenv("CAIRN_GERRIS_KILL_RANK");
  if (kill_at && sim->time.i == (guint)atoi(kill_at) && !resume_requested(p) &&
      (kill_rank == NULL || atoi(kill_rank) == p->rank)) {
    persist_wait(p); /* the step before is durable: the resume is at it */
    if (p->parallel) {
      agree_pending(p); /* and agreed on by every process */
      fprintf(stderr, "CairnPersist: rank %d killing itself at step %u\n", p->rank, sim->time.i);
      fflush(stderr);
    }
    raise(SIGKILL);
  }

  /* Gerris allocates the temporaries of a time step during the first one and
   * keeps their slots: slots past those of step 0 hold nothing between steps. */
  if (gfs_domain_variables_size(GFS_DOMAIN(sim)) <
      (p->state_doubles - 2 * FTT_NEIGHBORS) * sizeof(gdouble) + G_STRUCT_OFFSET(GfsStateVector, place_holder))
    cp_fail(p, "the cell layout shrank during the run");
  double t0 = now_seconds();
  if (p->mode == CP_MODE_OCTREE)
    persist_octree(p, sim);
  else
    p->bytes += persist_stream(p, sim);
  p->seconds += now_seconds() - t0;
  p->persists++;
  return TRUE;
}

/* ---- reading and writing the event in a .gfs file ---- */

static void cairn_persist_read(GtsObject** o, GtsFile* fp) {
  (*GTS_OBJECT_CLASS(cairn_persist_class())->parent_class->read)(o, fp);
  if (fp->type == GTS_ERROR) return;
  CairnPersist* p = CAIRN_PERSIST(*o);
  if (fp->type != '{') return;
  gchar *dir = NULL, *name = NULL, *mode = NULL;
  GtsFileVariable var[] = {{GTS_STRING, "dir", TRUE, &dir},     {GTS_STRING, "name", TRUE, &name},
                           {GTS_STRING, "mode", TRUE, &mode},   {GTS_INT, "resume", TRUE, &p->resume_option},
                           {GTS_INT, "async", TRUE, &p->async}, {GTS_NONE}};
  gts_file_assign_variables(fp, var);
  if (fp->type == GTS_ERROR) return;
  if (dir) {
    g_free(p->dir);
    p->dir = dir;
  }
  if (name) {
    g_free(p->name);
    p->name = name;
  }
  if (mode) {
    if (!strcmp(mode, "stream"))
      p->mode = CP_MODE_STREAM;
    else if (!strcmp(mode, "octree"))
      p->mode = CP_MODE_OCTREE;
    else
      gts_file_variable_error(fp, var, "mode", "unknown mode `%s' (stream or octree)", mode);
    g_free(mode);
  }
}

static void cairn_persist_write(GtsObject* o, FILE* fp) {
  (*GTS_OBJECT_CLASS(cairn_persist_class())->parent_class->write)(o, fp);
  CairnPersist* p = CAIRN_PERSIST(o);
  fprintf(fp, " { dir = %s name = %s mode = %s async = %d }", p->dir, p->name,
          p->mode == CP_MODE_OCTREE ? "octree" : "stream", p->async);
}

static void cairn_persist_destroy(GtsObject* o) {
  CairnPersist* p = CAIRN_PERSIST(o);
  persist_wait(p); /* the last step's persist, durable before the process ends */
#ifdef CAIRN_GERRIS_DIST
  if (p->parallel) {
    char err[256];
    guint64 version = 0;
    cp_dist_record r = {p->pending_step, p->lane, p->pending_version, 0};
    /* and agreed on, where MPI is still there (Gerris may have finalized it) */
    if (p->pending && cp_dist_commit(&r, &version, err, sizeof err) == 0) p->pending = FALSE;
    cp_dist_close();
  }
#endif
  if (p->persists && getenv("CAIRN_GERRIS_STATS"))
    fprintf(stderr, "CairnPersist: %s mode: %llu persists, %.1f bytes/persist, %.1f cells/persist, %.3f ms/persist\n",
            p->mode == CP_MODE_OCTREE ? "octree" : "stream", (unsigned long long)p->persists,
            (double)p->bytes / p->persists, (double)p->cells_written / p->persists, 1e3 * p->seconds / p->persists);
  if (p->persists && p->mode == CP_MODE_OCTREE && getenv("CAIRN_GERRIS_STATS"))
    fprintf(stderr,
            "CairnPersist: per persist: snapshot of the tree %.3f ms, header %.3f ms, waiting for the one before "
            "%.3f ms; the writing (%s): following the snapshot %.3f ms, persisting %.3f ms\n",
            1e3 * p->gather_s / p->persists, 1e3 * p->header_s / p->persists, 1e3 * p->wait_s / p->persists,
            p->async ? "beside the next step" : "in Gerris's thread", 1e3 * p->follow_s / p->persists,
            1e3 * p->write_s / p->persists);
  if (p->parallel) {
    for (int lane = 0; lane < 2; lane++)
      if (p->lane_tree[lane]) cairn_octree_close(&p->lane_tree[lane]);
    p->tree = NULL;
  } else if (p->tree) {
    cairn_octree_close(&p->tree);
  }
  g_free(p->base_name);
  if (p->events) g_ptr_array_free(p->events, TRUE);
  if (p->boxes) g_ptr_array_free(p->boxes, TRUE);
  g_free(p->graph);
  g_free(p->nodes.data);
  g_free(p->leaves.data);
  g_free(p->cells.data);
  g_free(p->dir);
  g_free(p->name);
  (*GTS_OBJECT_CLASS(cairn_persist_class())->parent_class->destroy)(o);
}

static void cairn_persist_class_init(GfsEventClass* klass) {
  klass->event = cairn_persist_event;
  GTS_OBJECT_CLASS(klass)->read = cairn_persist_read;
  GTS_OBJECT_CLASS(klass)->write = cairn_persist_write;
  GTS_OBJECT_CLASS(klass)->destroy = cairn_persist_destroy;
}

static void cairn_persist_init(CairnPersist* p) {
  p->dir = g_strdup(cairn_default_pool_dir());
  p->name = g_strdup("gerris");
  p->mode = CP_MODE_OCTREE;
  p->async = 1;
}

static GfsEventClass* cairn_persist_class(void) {
  static GfsEventClass* klass = NULL;
  if (klass == NULL) {
    GtsObjectClassInfo info = {"CairnPersist",
                               sizeof(CairnPersist),
                               sizeof(GfsEventClass),
                               (GtsObjectClassInitFunc)cairn_persist_class_init,
                               (GtsObjectInitFunc)cairn_persist_init,
                               (GtsArgSetFunc)NULL,
                               (GtsArgGetFunc)NULL};
    klass = gts_object_class_new(GTS_OBJECT_CLASS(gfs_event_class()), &info);
  }
  return klass;
}

/* GModule calls this when Gerris loads the module: the class must exist
 * before the parser meets `CairnPersist`. No gfs_module_name: Gerris then
 * writes the path the module was loaded from into snapshots, which a restart
 * (and the stream mode's gfs_simulation_read) can load again. */
const gchar* g_module_check_init(GModule* module);
const gchar* g_module_check_init(GModule* module) {
  (void)module;
  cairn_persist_class();
  return NULL;
}
