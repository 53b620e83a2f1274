/** PLACEHOLDER (issue 16): being written; replaced by the real adapter before this lands. */
import { AppError } from '@skinprices/domain';
import type { Adapter } from '../adapter.js';

export const skinportAdapter: Adapter = {
  format: 'skinport',
  kinds: [],
  // eslint-disable-next-line require-yield
  async *pages() {
    throw new AppError('upstream_rejected', 'skinport: not written yet');
  },
};
