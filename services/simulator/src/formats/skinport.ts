/** PLACEHOLDER (issue 16): being written; replaced by the real format before this lands. */
import type { Route } from './types.js';

export const skinportRoutes: Record<string, Route> = {};
