export * from './types.js';
export {
  EVENT_KINDS,
  eventSchema,
  schemaStem,
  schemaVersions,
  topicDefinitions,
  topicFor,
  type EventSchema,
  type TopicDefinition,
} from './schemas.js';
export { eventKey, itemKey, KEY_FIELDS_HEADER, keyHeaders, parseItemKey } from './keys.js';
export { partitionOfKey } from './partitioner.js';
export { validateEvent } from './validate.js';
export { compatibilityOf, EventSerde, TopicCodec, type Compatibility, type SerdeOptions } from './serde.js';
export {
  createKafka,
  EventConsumer,
  EventProducer,
  type ConsumedBatch,
  type ConsumerOptions,
  type DecodedMessage,
  type KafkaOptions,
  type SendResult,
} from './kafka.js';
export { deleteTopics, ensureTopics, waitForKafka } from './admin.js';
export { KAFKAJS_REQUEST_QUEUE } from './idle-loop.js';
export { kafkajsPatches, type KafkajsPatch } from './kafkajs.js';
