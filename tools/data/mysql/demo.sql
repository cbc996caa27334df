-- Demo business database for the payment incident of 2026-11-30 (all times are UTC).
--
-- payment-service v2.14.0 went out at 02:05 (healthy at 02:07). Its new payment-reconcile job updates
-- `payments` in one large transaction, so from 02:10 payment writes hit lock wait timeouts and the
-- service's connection pool ran dry. Enterprise orders that are confirmed synchronously
-- (payment_mode SYNC_CORPORATE) stayed in PAYING, ent-20931 above all. Rolled back to v2.13.4 at 02:52
-- (healthy at 02:54); the stuck orders still wait for the order-reconcile-job.
--
-- Loaded by `tools.mysql.load_demo_fixture` one statement at a time into the configured database:
-- no USE, no CREATE DATABASE, unqualified table names. Loading again replaces the tables. The rows are
-- generated deterministically (recursive CTE, MySQL 8 and MariaDB 10.2+), so demo answers are stable.

DROP TABLE IF EXISTS payment_attempts;
DROP TABLE IF EXISTS payments;
DROP TABLE IF EXISTS orders;
DROP TABLE IF EXISTS enterprise_accounts;
DROP TABLE IF EXISTS deploys;

CREATE TABLE enterprise_accounts (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  enterprise_id VARCHAR(16) NOT NULL,
  name VARCHAR(100) NOT NULL,
  tier VARCHAR(16) NOT NULL COMMENT 'ENTERPRISE | BUSINESS',
  payment_mode VARCHAR(24) NOT NULL COMMENT 'SYNC_CORPORATE: confirmed inline by payment-service | ASYNC',
  region VARCHAR(16) NOT NULL,
  status VARCHAR(16) NOT NULL COMMENT 'ACTIVE | SUSPENDED',
  account_manager VARCHAR(32) NULL,
  created_at DATETIME NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_enterprise_id (enterprise_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE orders (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  order_no VARCHAR(20) NOT NULL,
  enterprise_id VARCHAR(16) NULL COMMENT 'NULL for consumer orders',
  order_type VARCHAR(16) NOT NULL COMMENT 'CONSUMER | ENTERPRISE',
  status VARCHAR(16) NOT NULL COMMENT 'CREATED | PAYING | PAID | FAILED | CANCELLED',
  amount DECIMAL(12,2) NOT NULL,
  currency CHAR(3) NOT NULL DEFAULT 'CNY',
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_order_no (order_no),
  KEY idx_enterprise_id (enterprise_id),
  KEY idx_status (status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE payments (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  payment_no VARCHAR(20) NOT NULL,
  order_id BIGINT UNSIGNED NOT NULL,
  merchant_id INT UNSIGNED NOT NULL,
  channel VARCHAR(24) NOT NULL COMMENT 'CORPORATE_TRANSFER | ALIPAY | WECHAT_PAY | CARD',
  status VARCHAR(16) NOT NULL COMMENT 'PENDING | SUCCEEDED | FAILED',
  amount DECIMAL(12,2) NOT NULL,
  last_error_code VARCHAR(32) NULL COMMENT 'LOCK_WAIT_TIMEOUT | POOL_TIMEOUT',
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_payment_no (payment_no),
  KEY idx_order_id (order_id),
  KEY idx_merchant_id (merchant_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE payment_attempts (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  payment_id BIGINT UNSIGNED NOT NULL,
  attempt_no TINYINT UNSIGNED NOT NULL,
  service_version VARCHAR(16) NOT NULL,
  instance VARCHAR(48) NOT NULL,
  started_at DATETIME NOT NULL,
  duration_ms INT UNSIGNED NOT NULL,
  outcome VARCHAR(24) NOT NULL COMMENT 'OK | LOCK_WAIT_TIMEOUT | POOL_TIMEOUT',
  PRIMARY KEY (id),
  KEY idx_payment_id (payment_id),
  KEY idx_started_at (started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE deploys (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  deploy_id VARCHAR(32) NOT NULL,
  service VARCHAR(48) NOT NULL,
  environment VARCHAR(16) NOT NULL,
  kind VARCHAR(16) NOT NULL COMMENT 'DEPLOY | ROLLBACK',
  version VARCHAR(16) NOT NULL,
  previous_version VARCHAR(16) NULL,
  status VARCHAR(16) NOT NULL COMMENT 'SUCCEEDED | ROLLED_BACK | FAILED',
  triggered_by VARCHAR(48) NOT NULL,
  started_at DATETIME NOT NULL,
  finished_at DATETIME NULL,
  change_summary VARCHAR(255) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_deploy_id (deploy_id),
  KEY idx_service_started (service, started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO enterprise_accounts
  (enterprise_id, name, tier, payment_mode, region, status, account_manager, created_at)
VALUES
  ('ent-20931', '远航智造集团', 'ENTERPRISE', 'SYNC_CORPORATE', 'cn-east', 'ACTIVE', 'zhangmin', '2024-03-18 09:12:00'),
  ('ent-18842', '星河物流有限公司', 'ENTERPRISE', 'SYNC_CORPORATE', 'cn-north', 'ACTIVE', 'wangfang', '2023-11-02 10:40:00'),
  ('ent-27760', '青禾连锁零售', 'BUSINESS', 'ASYNC', 'cn-south', 'ACTIVE', 'liuyang', '2025-01-09 14:05:00'),
  ('ent-31877', '北辰医疗器械', 'ENTERPRISE', 'SYNC_CORPORATE', 'cn-north', 'ACTIVE', 'zhangmin', '2024-07-22 08:30:00'),
  ('ent-40215', '云岭旅游集团', 'BUSINESS', 'ASYNC', 'cn-southwest', 'ACTIVE', 'chenjie', '2025-05-30 16:20:00'),
  ('ent-11208', '海川能源科技', 'ENTERPRISE', 'SYNC_CORPORATE', 'cn-east', 'ACTIVE', 'wangfang', '2023-06-14 11:00:00'),
  ('ent-15530', '启明教育科技', 'BUSINESS', 'ASYNC', 'cn-central', 'ACTIVE', 'liuyang', '2024-09-03 15:45:00'),
  ('ent-22467', '锦程汽车服务', 'ENTERPRISE', 'SYNC_CORPORATE', 'cn-south', 'ACTIVE', 'chenjie', '2024-12-11 10:10:00'),
  ('ent-33019', '润泽食品集团', 'BUSINESS', 'ASYNC', 'cn-east', 'ACTIVE', 'zhangmin', '2025-03-27 09:05:00'),
  ('ent-36652', '恒信建材', 'ENTERPRISE', 'SYNC_CORPORATE', 'cn-north', 'SUSPENDED', 'wangfang', '2023-08-19 13:30:00'),
  ('ent-44871', '蓝湾酒店管理', 'BUSINESS', 'ASYNC', 'cn-south', 'ACTIVE', 'chenjie', '2025-08-08 08:08:00'),
  ('ent-48320', '拓维软件', 'BUSINESS', 'ASYNC', 'cn-east', 'ACTIVE', NULL, '2026-10-21 17:25:00');

INSERT INTO deploys
  (deploy_id, service, environment, kind, version, previous_version, status, triggered_by,
   started_at, finished_at, change_summary)
VALUES
  ('dep-20261118-1410-2b9d', 'payment-service', 'prod', 'DEPLOY', 'v2.13.4', 'v2.13.3', 'SUCCEEDED',
   'ci/payment-service#4760', '2026-11-18 14:10:00', '2026-11-18 14:12:41', '修复退款回调重复通知'),
  ('dep-20261124-1030-5c1a', 'order-service', 'prod', 'DEPLOY', 'v5.8.0', 'v5.7.2', 'SUCCEEDED',
   'ci/order-service#2291', '2026-11-24 10:30:00', '2026-11-24 10:34:12', '订单列表分页改为 keyset 分页'),
  ('dep-20261126-1545-9e07', 'account-service', 'prod', 'DEPLOY', 'v3.2.1', 'v3.2.0', 'SUCCEEDED',
   'ci/account-service#1187', '2026-11-26 15:45:00', '2026-11-26 15:47:30', 'SAML 断言时钟偏差容忍统一为 120 秒'),
  ('dep-20261127-1100-4d62', 'api-gateway', 'prod', 'DEPLOY', 'v1.19.3', 'v1.19.2', 'SUCCEEDED',
   'ci/api-gateway#903', '2026-11-27 11:00:00', '2026-11-27 11:06:05', '上游超时统一为 30s，新增 504 路由指标'),
  ('dep-20261129-1620-71af', 'order-service', 'prod', 'DEPLOY', 'v5.8.1', 'v5.8.0', 'SUCCEEDED',
   'ci/order-service#2304', '2026-11-29 16:20:00', '2026-11-29 16:23:48', 'payment.callback 消费者补充超时日志字段'),
  ('dep-20261130-0205-7f3a', 'payment-service', 'prod', 'DEPLOY', 'v2.14.0', 'v2.13.4', 'ROLLED_BACK',
   'ci/payment-service#4812', '2026-11-30 02:05:00', '2026-11-30 02:07:12',
   '新增 payment-reconcile 批量对账任务（batch_size=5000，单事务更新 payments）；HikariCP 参数迁移到配置中心'),
  ('dep-20261130-0252-c41e', 'payment-service', 'prod', 'ROLLBACK', 'v2.13.4', 'v2.14.0', 'SUCCEEDED',
   'oncall/liwei', '2026-11-30 02:52:00', '2026-11-30 02:54:05', 'INC-2026-1130-01：回滚 v2.14.0');

-- ent-20931's orders: the ones named in the demo logs, stuck in PAYING from 02:11 until the rollback.
INSERT INTO orders (order_no, enterprise_id, order_type, status, amount, created_at, updated_at) VALUES
  ('ord_318402276', 'ent-20931', 'ENTERPRISE', 'PAID', 18600.00, '2026-11-30 00:42:10', '2026-11-30 00:42:13'),
  ('ord_318977105', 'ent-20931', 'ENTERPRISE', 'PAID', 7250.50, '2026-11-30 01:05:44', '2026-11-30 01:05:46'),
  ('ord_319236648', 'ent-20931', 'ENTERPRISE', 'PAID', 42000.00, '2026-11-30 01:26:02', '2026-11-30 01:26:05'),
  ('ord_319580013', 'ent-20931', 'ENTERPRISE', 'PAID', 12999.00, '2026-11-30 01:47:31', '2026-11-30 01:47:33'),
  ('ord_319902457', 'ent-20931', 'ENTERPRISE', 'PAID', 3380.00, '2026-11-30 02:01:19', '2026-11-30 02:01:21'),
  ('ord_930052524', 'ent-20931', 'ENTERPRISE', 'PAYING', 15800.00, '2026-11-30 02:11:17', '2026-11-30 02:11:18'),
  ('ord_863426388', 'ent-20931', 'ENTERPRISE', 'PAYING', 8640.00, '2026-11-30 02:12:41', '2026-11-30 02:12:42'),
  ('ord_216275219', 'ent-20931', 'ENTERPRISE', 'PAYING', 23150.00, '2026-11-30 02:14:05', '2026-11-30 02:14:06'),
  ('ord_121065607', 'ent-20931', 'ENTERPRISE', 'PAYING', 5120.00, '2026-11-30 02:14:37', '2026-11-30 02:14:38'),
  ('ord_863948419', 'ent-20931', 'ENTERPRISE', 'PAYING', 31000.00, '2026-11-30 02:15:45', '2026-11-30 02:15:46'),
  ('ord_136311860', 'ent-20931', 'ENTERPRISE', 'PAYING', 9900.00, '2026-11-30 02:17:56', '2026-11-30 02:17:57'),
  ('ord_433219480', 'ent-20931', 'ENTERPRISE', 'PAYING', 14380.00, '2026-11-30 02:20:30', '2026-11-30 02:20:31'),
  ('ord_705136420', 'ent-20931', 'ENTERPRISE', 'PAYING', 6600.00, '2026-11-30 02:22:14', '2026-11-30 02:22:15'),
  ('ord_240543785', 'ent-20931', 'ENTERPRISE', 'PAYING', 27450.00, '2026-11-30 02:23:55', '2026-11-30 02:23:56'),
  ('ord_774781507', 'ent-20931', 'ENTERPRISE', 'PAYING', 4200.00, '2026-11-30 02:27:15', '2026-11-30 02:27:16'),
  ('ord_414543735', 'ent-20931', 'ENTERPRISE', 'PAYING', 18720.00, '2026-11-30 02:30:04', '2026-11-30 02:30:05'),
  ('ord_641968218', 'ent-20931', 'ENTERPRISE', 'PAYING', 11000.00, '2026-11-30 02:32:35', '2026-11-30 02:32:36'),
  ('ord_674718550', 'ent-20931', 'ENTERPRISE', 'PAYING', 7735.00, '2026-11-30 02:34:48', '2026-11-30 02:34:49'),
  ('ord_359549903', 'ent-20931', 'ENTERPRISE', 'PAYING', 52300.00, '2026-11-30 02:35:52', '2026-11-30 02:35:53'),
  ('ord_932236869', 'ent-20931', 'ENTERPRISE', 'PAYING', 16400.00, '2026-11-30 02:36:10', '2026-11-30 02:36:11'),
  ('ord_169971225', 'ent-20931', 'ENTERPRISE', 'PAYING', 8820.00, '2026-11-30 02:37:59', '2026-11-30 02:38:00'),
  ('ord_195261629', 'ent-20931', 'ENTERPRISE', 'PAYING', 21600.00, '2026-11-30 02:41:51', '2026-11-30 02:41:52'),
  ('ord_337900085', 'ent-20931', 'ENTERPRISE', 'PAYING', 3980.00, '2026-11-30 02:44:09', '2026-11-30 02:44:10'),
  ('ord_652238433', 'ent-20931', 'ENTERPRISE', 'PAYING', 12600.00, '2026-11-30 02:46:08', '2026-11-30 02:46:09'),
  ('ord_945822950', 'ent-20931', 'ENTERPRISE', 'PAYING', 45900.00, '2026-11-30 02:48:38', '2026-11-30 02:48:39'),
  ('ord_452076063', 'ent-20931', 'ENTERPRISE', 'PAYING', 6150.00, '2026-11-30 02:50:38', '2026-11-30 02:50:39'),
  ('ord_422399609', 'ent-20931', 'ENTERPRISE', 'PAYING', 19990.00, '2026-11-30 02:52:59', '2026-11-30 02:53:00'),
  ('ord_421675337', 'ent-20931', 'ENTERPRISE', 'PAID', 8800.00, '2026-11-30 03:05:31', '2026-11-30 03:05:38'),
  ('ord_469166478', 'ent-20931', 'ENTERPRISE', 'PAID', 13250.00, '2026-11-30 03:07:55', '2026-11-30 03:08:01');

-- Everyone else: 320 orders, one every 39 s from 00:00 to 03:28. Every sixth one is an enterprise order;
-- synchronously confirmed enterprise orders in the incident window (02:10-02:52) stay PAYING, a quarter
-- of the other orders in that window fail, the last minutes still have unpaid orders.
INSERT INTO orders (order_no, enterprise_id, order_type, status, amount, created_at, updated_at)
WITH RECURSIVE seq (n) AS (
  SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 320
),
gen AS (
  SELECT n,
         '2026-11-30 00:00:00' + INTERVAL (n * 39) SECOND AS created_at,
         CASE WHEN n % 6 = 0 THEN ELT(1 + (n DIV 6) % 8, 'ent-18842', 'ent-27760', 'ent-31877', 'ent-40215',
                                      'ent-11208', 'ent-15530', 'ent-22467', 'ent-33019') END AS enterprise_id,
         n * 39 >= 7800 AND n * 39 < 10320 AS in_incident
  FROM seq
),
classified AS (
  SELECT gen.*,
         CASE
           WHEN in_incident AND enterprise_id IS NOT NULL AND (n DIV 6) % 2 = 0 THEN 'PAYING'
           WHEN in_incident AND n % 4 = 0 THEN 'FAILED'
           WHEN n > 310 AND n % 2 = 1 THEN 'CREATED'
           WHEN n % 29 = 0 THEN 'CANCELLED'
           ELSE 'PAID'
         END AS status
  FROM gen
)
SELECT CONCAT('ord_', 500000000 + n * 2731),
       enterprise_id,
       IF(enterprise_id IS NULL, 'CONSUMER', 'ENTERPRISE'),
       status,
       IF(enterprise_id IS NULL, 19.90 + (n * 137) % 2000 + (n % 10) * 0.1, 3000 + (n * 1571) % 60000),
       created_at,
       created_at + INTERVAL (CASE status
                                WHEN 'PAYING' THEN 1
                                WHEN 'FAILED' THEN 31
                                WHEN 'CANCELLED' THEN 900
                                WHEN 'CREATED' THEN 0
                                ELSE IF(in_incident, 20 + n % 15, 3 + n % 9)
                              END) SECOND
FROM classified
ORDER BY n;

-- One payment per order that reached the payment step; corporate transfers settle to merchant 10023.
INSERT INTO payments
  (payment_no, order_id, merchant_id, channel, status, amount, last_error_code, created_at, updated_at)
SELECT CONCAT('pay_', 80000000 + o.id * 4099),
       o.id,
       IF(a.payment_mode = 'SYNC_CORPORATE', 10023, 10001 + (o.id * 7) % 97),
       IF(a.payment_mode = 'SYNC_CORPORATE', 'CORPORATE_TRANSFER', ELT(1 + o.id % 3, 'ALIPAY', 'WECHAT_PAY', 'CARD')),
       CASE o.status WHEN 'PAID' THEN 'SUCCEEDED' WHEN 'PAYING' THEN 'PENDING' ELSE 'FAILED' END,
       o.amount,
       CASE
         WHEN o.status = 'PAYING' THEN IF(o.id % 3 = 0, 'POOL_TIMEOUT', 'LOCK_WAIT_TIMEOUT')
         WHEN o.status = 'FAILED' THEN 'POOL_TIMEOUT'
       END,
       o.created_at + INTERVAL 1 SECOND,
       CASE o.status WHEN 'PAYING' THEN o.created_at + INTERVAL 94 SECOND ELSE o.updated_at END
FROM orders o
LEFT JOIN enterprise_accounts a ON a.enterprise_id = o.enterprise_id
WHERE o.status IN ('PAYING', 'PAID', 'FAILED')
ORDER BY o.id;

-- Attempts as payment-service recorded them: v2.14.0 served 02:07:12-02:54:05; a pending payment was
-- tried three times (about 31 s each), a failed one twice.
INSERT INTO payment_attempts (payment_id, attempt_no, service_version, instance, started_at, duration_ms, outcome)
SELECT p.id,
       k.attempt_no,
       IF(p.created_at >= '2026-11-30 02:07:12' AND p.created_at < '2026-11-30 02:54:05', 'v2.14.0', 'v2.13.4'),
       IF(p.created_at >= '2026-11-30 02:07:12' AND p.created_at < '2026-11-30 02:54:05',
          ELT(1 + (p.id + k.attempt_no) % 3, 'payment-service-5f7b6c9d4-a8j3v', 'payment-service-5f7b6c9d4-h6p2c',
              'payment-service-5f7b6c9d4-x4q9e'),
          ELT(1 + (p.id + k.attempt_no) % 3, 'payment-service-6c8f9d7b5-m9w4z', 'payment-service-6c8f9d7b5-t5r8n',
              'payment-service-6c8f9d7b5-k2x7q')),
       p.created_at + INTERVAL ((k.attempt_no - 1) * 31) SECOND,
       CASE
         WHEN p.status <> 'SUCCEEDED' THEN 30000 + (p.id * 97 + k.attempt_no * 13) % 12000
         WHEN p.created_at >= '2026-11-30 02:07:12' AND p.created_at < '2026-11-30 02:54:05'
           THEN 800 + (p.id * 53) % 4000
         ELSE 40 + (p.id * 37) % 160
       END,
       CASE
         WHEN p.status = 'SUCCEEDED' THEN 'OK'
         WHEN p.status = 'PENDING' AND (p.id + k.attempt_no) % 2 = 0 THEN 'LOCK_WAIT_TIMEOUT'
         ELSE 'POOL_TIMEOUT'
       END
FROM payments p
JOIN (SELECT 1 AS attempt_no UNION ALL SELECT 2 UNION ALL SELECT 3) k
  ON k.attempt_no <= CASE p.status WHEN 'PENDING' THEN 3 WHEN 'FAILED' THEN 2 ELSE 1 END
ORDER BY p.id, k.attempt_no;
