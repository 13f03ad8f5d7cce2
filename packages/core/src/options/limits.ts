/**
 * The ceilings every duration option and stored duration is checked
 * against, written once.
 */

/** Node's timer limit in ms (2^31 - 1): a longer setTimeout or setInterval fires after 1 ms instead. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * The longest duration idempo stores (a retention, a sleep): 100 years in
 * ms, so the database clock arithmetic stays far from overflow.
 */
export const MAX_STORED_MS = 100 * 365 * 24 * 60 * 60 * 1000;

/** The largest priority (`.priority`, enqueue's `priority`), and minus it the smallest: PostgreSQL's integer. */
export const MAX_PRIORITY = 2_147_483_647;

/**
 * The most children one `.map` item may start (and its largest
 * `concurrency`): inputs over it park the parent before any child is written.
 */
export const MAX_CHILDREN = 10_000;
