import { describe, expect, it } from 'vitest';
import { FaultBoard, duplicateFirst, emptyFirstList, zeroPrices, type FaultKind, type FaultSpec } from './faults.js';

const kinds = (specs: readonly FaultSpec[]): FaultKind[] => specs.map((f) => f.kind);
const always = (): number => 0;

describe('FaultBoard', () => {
  it('fires a plain fault on every request of its market only', () => {
    const board = new FaultBoard();
    board.set('cn-b', { kind: 'error5xx' });
    for (let i = 0; i < 3; i++) expect(kinds(board.pick('cn-b', '/market/goods', always))).toEqual(['error5xx']);
    expect(board.pick('cn-a', '/market/goods', always)).toEqual([]);
  });

  it('`after` lets that many matching requests through first', () => {
    const board = new FaultBoard();
    board.set('cn-a', { kind: 'rateLimit', after: 2 });
    expect(board.pick('cn-a', '/x', always)).toEqual([]);
    expect(board.pick('cn-a', '/x', always)).toEqual([]);
    expect(kinds(board.pick('cn-a', '/x', always))).toEqual(['rateLimit']);
    expect(kinds(board.pick('cn-a', '/x', always))).toEqual(['rateLimit']);
  });

  it('`times` removes the fault after it fired that many times', () => {
    const board = new FaultBoard();
    board.set('cn-a', { kind: 'malformed', times: 2 });
    expect(kinds(board.pick('cn-a', '/x', always))).toEqual(['malformed']);
    expect(kinds(board.pick('cn-a', '/x', always))).toEqual(['malformed']);
    expect(board.pick('cn-a', '/x', always)).toEqual([]);
    expect(board.list()).toEqual({ 'cn-a': [] });
  });

  it('`after` and `times` together break a run in the middle and then recover', () => {
    const board = new FaultBoard();
    board.set('cn-a', { kind: 'error5xx', after: 1, times: 1 });
    const fired = Array.from({ length: 4 }, () => board.pick('cn-a', '/x', always).length);
    expect(fired).toEqual([0, 1, 0, 0]);
  });

  it('`rate` fires when the injected random draw is below it', () => {
    const board = new FaultBoard();
    board.set('eu-a', { kind: 'latency', rate: 0.3, latencyMs: 1 });
    const draws = [0.1, 0.3, 0.9, 0.29999];
    const fired = draws.map((u) => board.pick('eu-a', '/x', () => u).length);
    expect(fired).toEqual([1, 0, 0, 1]);
  });

  it('rate 0 never fires, rate 1 always does', () => {
    const board = new FaultBoard();
    board.set('eu-a', { kind: 'emptyPage', rate: 0 });
    board.set('eu-b', { kind: 'emptyPage', rate: 1 });
    expect(board.pick('eu-a', '/x', always)).toEqual([]);
    expect(board.pick('eu-b', '/x', () => 0.999999).length).toBe(1);
  });

  it('`path` limits the fault to requests whose path starts with it (others do not count)', () => {
    const board = new FaultBoard();
    board.set('cn-b', { kind: 'error5xx', path: '/market/buy_order', after: 1 });
    expect(board.pick('cn-b', '/market/goods', always)).toEqual([]);
    expect(board.pick('cn-b', '/market/goods', always)).toEqual([]);
    expect(board.pick('cn-b', '/market/buy_order/top', always)).toEqual([]); // the one let through
    expect(kinds(board.pick('cn-b', '/market/buy_order/float', always))).toEqual(['error5xx']);
    expect(board.pick('cn-b', '/market/goods', always)).toEqual([]);
  });

  it('fires several faults of one market together', () => {
    const board = new FaultBoard();
    board.set('cn-a', { kind: 'latency', latencyMs: 5 });
    board.set('cn-a', { kind: 'zeroPrices' });
    expect(kinds(board.pick('cn-a', '/x', always))).toEqual(['latency', 'zeroPrices']);
  });

  it('refuses unknown kinds and rates outside [0, 1]', () => {
    const board = new FaultBoard();
    expect(() => board.set('cn-a', { kind: 'explode' as FaultKind })).toThrow(RangeError);
    expect(() => board.set('cn-a', { kind: 'error5xx', rate: 1.5 })).toThrow(RangeError);
    expect(() => board.set('cn-a', { kind: 'error5xx', rate: -0.1 })).toThrow(RangeError);
    expect(() => board.set('cn-a', { kind: 'error5xx', rate: Number.NaN })).toThrow(RangeError);
    expect(board.list()).toEqual({});
  });

  it('lists specs without counters and clears per market or all', () => {
    const board = new FaultBoard();
    board.set('cn-a', { kind: 'rateLimit', retryAfterS: 3 });
    board.set('cn-b', { kind: 'error5xx', status: 502 });
    board.pick('cn-a', '/x', always);
    expect(board.list()).toEqual({
      'cn-a': [{ kind: 'rateLimit', retryAfterS: 3 }],
      'cn-b': [{ kind: 'error5xx', status: 502 }],
    });
    board.clear('cn-a');
    expect(board.pick('cn-a', '/x', always)).toEqual([]);
    expect(Object.keys(board.list())).toEqual(['cn-b']);
    board.clear();
    expect(board.list()).toEqual({});
    expect(board.pick('cn-b', '/x', always)).toEqual([]);
  });
});

describe('emptyFirstList', () => {
  it("empties the page's item list and keeps the envelope", () => {
    const body = { code: 0, msg: 'success', data: { items: [{ a: 1 }, { a: 2 }], next_cursor: 'MTAw' } };
    expect(emptyFirstList(body)).toEqual({ code: 0, msg: 'success', data: { items: [], next_cursor: 'MTAw' } });
    // The input is not mutated.
    expect(body.data.items).toHaveLength(2);
  });

  it('empties only the first non-empty list, depth first', () => {
    const body = { skipped: [], data: { total: 3, items: [{ x: [1, 2] }] }, later: [1, 2] };
    expect(emptyFirstList(body)).toEqual({ skipped: [], data: { total: 3, items: [] }, later: [1, 2] });
  });

  it('turns a body without any list into an empty document', () => {
    expect(emptyFirstList({ a: { b: 1 } })).toEqual({});
  });
});

describe('duplicateFirst', () => {
  it('repeats the first item of the first list at its end', () => {
    const body = { success: true, total_count: 2, results: [{ id: 1 }, { id: 2 }] };
    expect(duplicateFirst(body)).toEqual({ success: true, total_count: 2, results: [{ id: 1 }, { id: 2 }, { id: 1 }] });
  });

  it('leaves empty lists and lists of plain values as lists', () => {
    // A page past the end: nothing to duplicate, the body must stay as it was.
    const lastPage = { code: 0, data: { items: [], next_cursor: null } };
    expect(duplicateFirst(lastPage)).toEqual(lastPage);
    const withTags = { tags: ['a', 'b'], rows: [{ x: 1 }] };
    expect(duplicateFirst(withTags)).toEqual({ tags: ['a', 'b'], rows: [{ x: 1 }, { x: 1 }] });
  });
});

describe('zeroPrices', () => {
  it('zeroes every price-like field, numbers and decimal strings', () => {
    const body = {
      code: 0,
      data: {
        items: [
          { market_hash_name: 'AK-47 | Redline (Field-Tested)', sell_min_price_fen: 12345, sell_num: 17 },
          { sell_min_price: '12.5', buy_max_price: '11', blue_buy_max_price_fen: null },
          { price_cents: 999, quantity: 4, close: '3.10', volume: 8 },
        ],
      },
    };
    expect(zeroPrices(body)).toEqual({
      code: 0,
      data: {
        items: [
          { market_hash_name: 'AK-47 | Redline (Field-Tested)', sell_min_price_fen: 0, sell_num: 17 },
          { sell_min_price: '0', buy_max_price: '0', blue_buy_max_price_fen: null },
          { price_cents: 0, quantity: 4, close: '0', volume: 8 },
        ],
      },
    });
  });

  it('does not zero counts (sell_num, qty, buy_num, count …)', () => {
    const body = { sell_num: 5, qty: 3, buy_num: 2, num: 1, total_count: 40, count: 7, sell_listings: 9 };
    expect(zeroPrices(body)).toEqual(body);
    const priceMap = { 'AK-47 | Redline (Field-Tested)': [{ phase: null, min_price: '1.50', qty: 12 }] };
    expect(zeroPrices(priceMap)).toEqual({
      'AK-47 | Redline (Field-Tested)': [{ phase: null, min_price: '0', qty: 12 }],
    });
  });

  it('does not zero float bounds, float values, ids or times', () => {
    const cnA = {
      template_id: 100_007,
      ranges: [{ min: '0.00', max: '0.01', first_price_fen: 500, fifth_price_fen: 520, sell_num: 6 }],
    };
    expect(zeroPrices(cnA)).toEqual({
      template_id: 100_007,
      ranges: [{ min: '0.00', max: '0.01', first_price_fen: 0, fifth_price_fen: 0, sell_num: 6 }],
    });
    const order = { id: 'cn-b-fbo-1-0', float_min: '0.07', float_max: '0.08', price: '3.3', num: 1 };
    expect(zeroPrices(order)).toEqual({ ...order, price: '0' });
    const sale = { sold_at: 1_736_000_000, float_value: '0.1234567890', paint_index: 44, paint_seed: 661 };
    expect(zeroPrices(sale)).toEqual(sale);
  });

  it("zeroes the prices in the store's [price, quantity] order-book graphs, not the quantities", () => {
    const book = {
      success: true,
      results: [{ hash_name: 'Recoil Case', sell_order_graph: [['1.23', 5]], buy_order_graph: [['1.01', 12]] }],
    };
    expect(zeroPrices(book)).toEqual({
      success: true,
      results: [{ hash_name: 'Recoil Case', sell_order_graph: [['0', 5]], buy_order_graph: [['0', 12]] }],
    });
  });
});
