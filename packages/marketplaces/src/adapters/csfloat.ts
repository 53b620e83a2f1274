/** PLACEHOLDER (issue 16): being written; replaced by the real adapter before this lands. */
import { AppError } from '@skinprices/domain';
import type { Adapter } from '../adapter.js';

export const csfloatAdapter: Adapter = {
  format: 'csfloat',
  kinds: [],
  // eslint-disable-next-line require-yield
  async *pages() {
    throw new AppError('upstream_rejected', 'csfloat: not written yet');
  },
};
