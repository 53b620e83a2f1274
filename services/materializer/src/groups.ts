/**
 * The materializer's Kafka consumer groups. The listings lane (listings and poll-cycle markers)
 * keeps the materializer's own group id, so the pollers' catalogue gate, which reads that group's
 * committed listings offsets, and a deployment's listings position are unchanged; the other
 * kinds' lane is a second group (materializer.ts). PostgreSQL's consumer_offsets keep the one
 * group id for both lanes: what is applied is decided there, not by Kafka's groups, which are
 * only where a consumer starts.
 */
export const otherKindsGroup = (groupId: string): string => `${groupId}.other-kinds`;

/** Every Kafka group a materializer of `groupId` joins (what a reset or a replay's tidy-up deletes). */
export const kafkaGroups = (groupId: string): string[] => [groupId, otherKindsGroup(groupId)];
