CREATE DATABASE skinprices_registry;
