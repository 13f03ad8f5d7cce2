/**
 * Paging through `engine.listKeys` for `keys list` and `keys stuck`:
 * newest first, `--limit` rows a page, `--cursor` to continue, `--all` to
 * walk every page. `--older-than` is applied here because the engine has no
 * such filter: as rows come newest first, the matching rows are a suffix of
 * the listing, so pages are skipped until the first match and the cursor
 * stays valid from then on (the first page shown may be short).
 */
import type { Engine, KeyPage, ListKeysOptions, RunRecord, RunStatus } from "@idempo/core";
import { InputValidationError } from "@idempo/core";

/** Filters of a key listing. */
export interface KeyQuery {
  tenantId?: string;
  workflow?: string;
  status?: RunStatus;
  stuck?: boolean;
  /** Only records created at least this long ago (ms, DB clock). */
  olderThanMs?: number;
}

/** Paging of a key listing. */
export interface Paging {
  /** Rows per page, 1-1000. */
  limit: number;
  cursor?: string;
  /** Walk every page instead of stopping after one. */
  all: boolean;
}

/** How many records `--older-than` may skip before it gives up and says so. */
const MAX_SKIPPED = 100_000;

/**
 * Call `onPage` with each page of matching records (one page, or all with
 * `paging.all`). `now` is the database clock.
 *
 * @returns the cursor of the next page, or `null` after the last.
 */
export async function forEachKeyPage(
  engine: Engine,
  query: KeyQuery,
  paging: Paging,
  now: Date,
  onPage: (items: readonly RunRecord[]) => Promise<void> | void,
): Promise<{ nextCursor: string | null; skipped: number }> {
  const base: ListKeysOptions = { limit: paging.limit };
  if (query.tenantId !== undefined) base.tenantId = query.tenantId;
  if (query.workflow !== undefined) base.workflow = query.workflow;
  if (query.status !== undefined) base.status = query.status;
  if (query.stuck) base.stuck = true;
  const threshold = query.olderThanMs === undefined ? undefined : now.getTime() - query.olderThanMs;
  let cursor = paging.cursor;
  let skipped = 0;
  let shown = false;
  for (;;) {
    const page = await listPage(engine, base, cursor, cursor === paging.cursor);
    const items = threshold === undefined ? page.items : page.items.filter((r) => r.createdAt.getTime() <= threshold);
    skipped += page.items.length - items.length;
    if (items.length > 0 || page.nextCursor === null || shown) {
      await onPage(items);
      shown = true;
    }
    if (page.nextCursor === null) return { nextCursor: null, skipped };
    cursor = page.nextCursor;
    if (shown && !paging.all) return { nextCursor: cursor, skipped };
    if (skipped >= MAX_SKIPPED) return { nextCursor: cursor, skipped };
  }
}

/** One page; a cursor the operator typed that the engine refuses is reported in the CLI's words. */
async function listPage(
  engine: Engine,
  base: ListKeysOptions,
  cursor: string | undefined,
  typed: boolean,
): Promise<KeyPage> {
  if (cursor === undefined) return engine.listKeys(base);
  try {
    return await engine.listKeys({ ...base, cursor });
  } catch (error) {
    if (!typed || !(error instanceof InputValidationError) || error.issues[0]?.path !== "cursor") throw error;
    throw new InputValidationError(
      [
        {
          path: "--cursor",
          message:
            "not a cursor this command printed: copy the value after 'next page: --cursor' (or 'more keys: add --cursor') of the page before",
        },
      ],
      { cause: error },
    );
  }
}
