/**
 * Checks of the spec's row fields whose content is ours to define (docs/api.md, "The listing
 * fields"; docs/architecture.md, "Row fields filled upstream"), shared by the suites that read
 * rows from the API.
 */
import { getMarket } from '@skinprices/domain';

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Problems with the `item_page_url` of 2.4 rows: each must be the marketplace's template with
 * the row's name (percent-encoded) and some integer id. Empty when all are right.
 */
export function itemPageUrlProblems(market: string, rows: readonly Record<string, unknown>[]): string[] {
  const template = getMarket(market).itemPageUrlTemplate;
  if (template === undefined) return [`${market} has no item page template`];
  return rows.flatMap((r) => {
    const name = String(r.market_hash_name);
    const pattern = new RegExp(
      `^${escape(template)
        .replace(escape('{id}'), () => '\\d+')
        .replace(escape('{market_hash_name}'), () => escape(encodeURIComponent(name)))}$`,
    );
    const url = r.item_page_url;
    return typeof url === 'string' && pattern.test(url) ? [] : [`${market} ${name}: ${JSON.stringify(url)}`];
  });
}

/** Problems with CN-B buy-order rows' `typeId` (2.5: an integer on every row). */
export function typeIdProblems(rows: readonly Record<string, unknown>[]): string[] {
  return rows.flatMap((r) =>
    Number.isInteger(r.typeId) ? [] : [`${String(r.market_hash_name)}: typeId ${JSON.stringify(r.typeId)}`],
  );
}
