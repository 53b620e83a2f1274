/** The 24 h sales export: building (COPY → archiver) and the shared cache. */
export { buildSalesExport, EXPORT_FILES, WINDOW_MS, type BuiltExport } from './sales-export.js';
export { SalesExportCache, type ExportCacheOptions, type StoredExport } from './cache.js';
export { DailyExportScheduler, type SchedulerState } from './scheduler.js';
