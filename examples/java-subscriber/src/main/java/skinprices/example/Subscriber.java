package skinprices.example;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads topics of the price platform from their beginning to their current end, as a downstream
 * team would: kafka-clients and Apache Avro only. Every record is Confluent wire format (magic
 * byte 0, the writer schema's id as 4 bytes big-endian, the Avro body); the writer schema is
 * fetched by id from the registry's Confluent-compatible API. With {@code --readers DIR} every
 * record is also decoded with every schema version kept in DIR/&lt;stem&gt;/vN.avsc as the reader
 * (Avro schema resolution), which is what a consumer compiled against an older version does.
 *
 * <pre>
 *   java -cp 'target/classes:target/lib/*' skinprices.example.Subscriber \
 *     --brokers 127.0.0.1:9092 --registry http://127.0.0.1:8081/apis/ccompat/v7 \
 *     --readers packages/events/schemas/versions --topic listings.v1=listing --topic sales.v1=sale
 * </pre>
 *
 * Prints one JSON line per topic; exits 1 if a record could not be decoded with its writer schema.
 */
public final class Subscriber {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpClient http = HttpClient.newHttpClient();
  private final String registry;
  private final Map<Integer, Schema> writers = new HashMap<>();

  private Subscriber(String registry) {
    this.registry = registry.replaceAll("/+$", "");
  }

  /** What one topic held and how it decoded. */
  static final class Tally {
    long records;
    long tombstones;
    long decoded;
    long failures;
    String firstFailure;
    final Map<String, long[]> readers = new TreeMap<>();
    String sample;

    Map<String, Object> json(String topic) {
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("topic", topic);
      out.put("records", records);
      out.put("tombstones", tombstones);
      out.put("decoded", decoded);
      out.put("failures", failures);
      out.put("firstFailure", firstFailure);
      Map<String, Object> r = new LinkedHashMap<>();
      readers.forEach((v, n) -> r.put(v, Map.of("decoded", n[0], "failures", n[1])));
      out.put("readers", r);
      out.put("sample", sample);
      return out;
    }
  }

  public static void main(String[] args) throws Exception {
    String brokers = env("KAFKA_BROKERS", "127.0.0.1:9092");
    String registry = env("SCHEMA_REGISTRY_URL", "http://127.0.0.1:8081/apis/ccompat/v7");
    Path readers = null;
    long timeoutMs = 120_000;
    Map<String, String> topics = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      String v = i + 1 < args.length ? args[i + 1] : null;
      switch (a) {
        case "--brokers" -> brokers = v;
        case "--registry" -> registry = v;
        case "--readers" -> readers = Path.of(v);
        case "--timeout-ms" -> timeoutMs = Long.parseLong(v);
        case "--topic" -> {
          int eq = v.indexOf('=');
          topics.put(eq < 0 ? v : v.substring(0, eq), eq < 0 ? null : v.substring(eq + 1));
        }
        default -> throw new IllegalArgumentException("unknown argument " + a);
      }
      i++;
    }
    if (topics.isEmpty()) throw new IllegalArgumentException("name at least one --topic <name>[=<schema stem>]");
    Subscriber subscriber = new Subscriber(registry);
    boolean failed = false;
    for (Map.Entry<String, String> t : topics.entrySet()) {
      List<Map.Entry<String, Schema>> versions = new ArrayList<>();
      if (readers != null && t.getValue() != null) versions = readerVersions(readers.resolve(t.getValue()));
      Tally tally = subscriber.read(brokers, t.getKey(), versions, timeoutMs);
      System.out.println(JSON.writeValueAsString(tally.json(t.getKey())));
      failed |= tally.failures > 0;
    }
    System.exit(failed ? 1 : 0);
  }

  /** Every kept version of one schema (v1.avsc, v2.avsc …), in order. */
  static List<Map.Entry<String, Schema>> readerVersions(Path dir) throws IOException {
    List<Map.Entry<String, Schema>> out = new ArrayList<>();
    try (Stream<Path> files = Files.list(dir)) {
      for (Path f : files.filter(p -> p.getFileName().toString().matches("v\\d+\\.avsc")).sorted((a, b) -> version(a) - version(b)).toList()) {
        // A parser per file: the versions share their record names.
        out.add(Map.entry(f.getFileName().toString().replace(".avsc", ""), new Schema.Parser().parse(f.toFile())));
      }
    }
    return out;
  }

  private static int version(Path p) {
    return Integer.parseInt(p.getFileName().toString().replaceAll("\\D", ""));
  }

  Tally read(String brokers, String topic, List<Map.Entry<String, Schema>> versions, long timeoutMs) throws Exception {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
    Tally tally = new Tally();
    for (Map.Entry<String, Schema> v : versions) tally.readers.put(v.getKey(), new long[2]);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> partitions = consumer.partitionsFor(topic, Duration.ofSeconds(30)).stream()
          .map(p -> new TopicPartition(topic, p.partition()))
          .toList();
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      // The end as it stands now: records produced later are left for the next run.
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
      long deadline = System.currentTimeMillis() + timeoutMs;
      while (!atEnd(consumer, partitions, end)) {
        if (System.currentTimeMillis() > deadline) throw new IllegalStateException(topic + ": not read to its end in time");
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
          if (r.offset() >= end.get(new TopicPartition(r.topic(), r.partition()))) continue;
          decode(r.value(), versions, tally);
        }
      }
    }
    return tally;
  }

  private static boolean atEnd(KafkaConsumer<?, ?> consumer, List<TopicPartition> partitions, Map<TopicPartition, Long> end) {
    for (TopicPartition p : partitions) if (consumer.position(p) < end.get(p)) return false;
    return true;
  }

  private void decode(byte[] value, List<Map.Entry<String, Schema>> versions, Tally tally) {
    tally.records++;
    if (value == null) {
      tally.tombstones++;
      return;
    }
    try {
      ByteBuffer buf = ByteBuffer.wrap(value);
      byte magic = buf.get();
      if (magic != 0) throw new IllegalArgumentException("magic byte " + magic + ", not 0");
      Schema writer = writer(buf.getInt());
      int at = buf.position();
      GenericRecord record = read(writer, writer, value, at);
      tally.decoded++;
      if (tally.sample == null) tally.sample = record.toString();
      for (Map.Entry<String, Schema> v : versions) {
        long[] n = tally.readers.get(v.getKey());
        try {
          read(writer, v.getValue(), value, at);
          n[0]++;
        } catch (Exception e) {
          n[1]++;
        }
      }
    } catch (Exception e) {
      tally.failures++;
      if (tally.firstFailure == null) tally.firstFailure = e.toString();
    }
  }

  /** The body decoded with the writer's schema resolved to the reader's; every byte must be used. */
  private static GenericRecord read(Schema writer, Schema reader, byte[] value, int at) throws IOException {
    BinaryDecoder decoder = DecoderFactory.get().binaryDecoder(value, at, value.length - at, null);
    GenericRecord record = new GenericDatumReader<GenericRecord>(writer, reader).read(null, decoder);
    if (!decoder.isEnd()) throw new IOException("bytes left after the record");
    return record;
  }

  private Schema writer(int id) throws IOException, InterruptedException {
    Schema cached = writers.get(id);
    if (cached != null) return cached;
    HttpRequest req = HttpRequest.newBuilder(URI.create(registry + "/schemas/ids/" + id)).GET().build();
    HttpResponse<String> res = http.send(req, HttpResponse.BodyHandlers.ofString());
    if (res.statusCode() != 200) throw new IOException("registry answered " + res.statusCode() + " for schema id " + id);
    Schema schema = new Schema.Parser().parse(JSON.readTree(res.body()).get("schema").asText());
    writers.put(id, schema);
    return schema;
  }

  private static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }
}
