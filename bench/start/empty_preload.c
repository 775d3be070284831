/* An empty shared library: preloaded, it measures what loading any library costs a process
 * start (the floor an allocator's start-up cost is read against). */
int ak_empty_preload_marker;
